"""The LLM client against real-world server behaviour, on the scripted server of tests/llm_server.py:
llama.cpp's own refusals, truncated answers, deterministic rejections, an endpoint that goes away, and
identical requests in flight. (tests/test_faults_llama.py runs the same cases against llama.cpp itself.)"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from evalcore.core.errors import MAX_REASON_CHARS
from evalcore.judges.llm_judges import McqLLMJudge
from evalcore.llm.cache import RequestLog, ResponseCache
from evalcore.llm.client import EndpointConfig, LLMClient
from evalcore.models.base import AudioPrompt
from evalcore.models.openai_audio import OpenAIAudioChat
from llm_server import TEST_API_KEY_ENV, FaultSchedule, Fault, LLMServer, install_test_key

install_test_key()
FAST = dict(model="m", api_key_env=TEST_API_KEY_ENV, rpm=100_000, tpm=100_000_000, timeout_s=5.0,
            backoff_base_s=0.01, backoff_max_s=0.05)


def _client(srv: LLMServer, tmp_path, **kw) -> LLMClient:
    cfg = EndpointConfig(base_url=srv.base_url, **{**FAST, **kw})
    return LLMClient(cfg, cache=ResponseCache(str(tmp_path / "cache")), log=RequestLog(str(tmp_path / "log.jsonl")))


def _msgs(i: int = 0) -> list[dict]:
    return [{"role": "user", "content": f"question {i}"}]


def test_json_schema_refused_with_llamas_500_steps_down_and_scores(tmp_path) -> None:
    with LLMServer(answer=lambda m: '{"choice": "B"}', llama_refusals=True) as srv:
        judge = McqLLMJudge(output="json", base_url=srv.base_url, cache_root=str(tmp_path), max_retries=5,
                            threads=1, **FAST)
        out = judge.judge(["I pick the second", "the second again", "surely the second"], [["x", "y"]] * 3)
        statuses = [r.status for r in srv.requests]
        formats = [(json.loads(r.body).get("response_format") or {}).get("type") for r in srv.requests]
    assert [r.get("parsed_index") for r in out] == [1, 1, 1] and not any(r.get("error") for r in out)
    assert statuses.count(500) == 1 and formats[0] == "json_schema"  # refused once, remembered
    assert set(formats[1:]) == {"json_object"} and statuses[1:] == [200] * 3


def test_a_truncated_answer_is_an_incomplete_error_never_cached_or_parsed(tmp_path) -> None:
    with LLMServer(answer=lambda m: ("a", "length")) as srv:
        judge = McqLLMJudge(base_url=srv.base_url, cache_root=str(tmp_path / "c"), **FAST)
        first = judge.judge(["A guitar plays"], [["guitar", "piano"]])
        again = judge.judge(["A guitar plays"], [["guitar", "piano"]])
        calls = srv.chat_calls()
    for out in (first, again):
        assert out[0]["parsed_index"] is None and out[0]["error_class"] == "incomplete"
        assert out[0]["error"].startswith("incomplete: the answer was cut at the token limit")
    assert calls == 2  # one call each: not retried, and the cut answer was never cached
    assert not list((tmp_path / "c").rglob("*.json"))


def test_a_4xx_is_not_retried_and_a_validation_500_once_at_most(tmp_path) -> None:
    with LLMServer(response_formats=("json_object",)) as srv:  # 400 for any other response_format
        c = _client(srv, tmp_path, structured="json_schema", max_retries=5)
        from evalcore.llm.prompts import McqChoice

        r = c.complete_json(_msgs(), McqChoice)
        assert r.error_class == "input" and r.attempts == 1 and srv.chat_calls() == 1
    audio = [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "UklGR" * 4000,
                                                                                 "format": "wav"}},
                                          {"type": "text", "text": "hi"}]}]
    with LLMServer(llama_refusals=True) as srv:
        r = _client(srv, tmp_path, max_retries=5).complete(audio)
        assert r.error_class == "input" and r.attempts == 2 and srv.chat_calls() == 2
        assert r.error.startswith("HTTP 500: ") and r.error.endswith("(after 2 attempts)")
        assert len(r.error) <= MAX_REASON_CHARS and "UklGRUklGR" not in r.error


def test_server_errors_and_connection_errors_are_transient_and_say_the_attempts(tmp_path) -> None:
    with LLMServer(faults=FaultSchedule(by_index={i: Fault("500") for i in range(10)})) as srv:
        r = _client(srv, tmp_path, max_retries=2).complete(_msgs())
        assert r.error_class == "transient" and srv.chat_calls() == 3 and r.error.endswith("(after 3 attempts)")
    srv = LLMServer().start()
    srv.down()
    try:
        r = _client(srv, tmp_path, max_retries=2).complete(_msgs(1))
    finally:
        srv.stop()
    assert r.error_class == "transient" and r.error.startswith("connection error")
    assert r.error.endswith("(after 3 attempts)")


def test_identical_requests_in_flight_make_one_call(tmp_path) -> None:
    keys = [i % 10 for i in range(50)]  # 50 requests, 10 distinct
    with LLMServer(delay_s=0.3) as srv:
        c = _client(srv, tmp_path)
        with ThreadPoolExecutor(16) as pool:
            out = list(pool.map(lambda k: c.complete(_msgs(k)), keys))
        calls = srv.chat_calls()
    assert calls == 10 and all(o.text for o in out)
    assert sum(o.shared for o in out) + sum(o.cached for o in out) == 40
    assert [o.text for o in out[:10]] == [o.text for o in out[10:20]]


def test_a_follower_shares_the_leaders_error_too(tmp_path) -> None:
    with LLMServer(delay_s=0.3, faults=FaultSchedule(by_index={0: Fault("500")})) as srv:
        c = _client(srv, tmp_path, max_retries=0)
        with ThreadPoolExecutor(4) as pool:
            out = list(pool.map(lambda _: c.complete(_msgs()), range(4)))
        assert srv.chat_calls() == 1
    assert all(o.error_class == "transient" and o.error.startswith("HTTP 500") for o in out)


def test_audio_refused_by_an_echoing_500_leaves_small_bounded_errors_and_log(tmp_path) -> None:
    """30 requests of 2 s audio against llama.cpp's echoing 500: bounded reasons, a small request log."""
    log_root = tmp_path / "run"
    with LLMServer(llama_refusals=True) as srv:
        model = OpenAIAudioChat(base_url=srv.base_url, model="m", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                                tpm=100_000_000, max_retries=5, cache_root=str(tmp_path / "cache"),
                                log_root=str(log_root), threads=8)
        rng = np.random.default_rng(0)
        batch = [AudioPrompt(rng.uniform(-0.5, 0.5, 32_000).astype(np.float32), 16_000, f"q{i}") for i in range(30)]
        out = model.generate(batch)
        calls = srv.chat_calls()
        echoed = max(len(r.body) for r in srv.requests)
    assert all(isinstance(o, Exception) and o.error_class == "input" for o in out)
    assert calls == 60  # each request: the refusal and one more try, never five
    assert all(len(str(o)) <= MAX_REASON_CHARS and "\n" not in str(o) for o in out)
    log_bytes = sum(p.stat().st_size for p in (log_root / "llm-log").glob("*.jsonl"))
    assert echoed > 80_000 and log_bytes < 200_000  # the log holds no audio and no echoed payload
