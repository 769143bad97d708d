"""Structured/JSON output (LLMClient.complete_json, mcq_llm output=json) against tests/llm_server.py."""

from __future__ import annotations

import json
import re
import threading

from evalcore.judges.llm_judges import McqLLMJudge
from evalcore.llm.actors import complete_many
from evalcore.llm.batch import run_batch
from evalcore.llm.cache import ResponseCache
from evalcore.llm.client import EndpointConfig, LLMClient
from evalcore.llm.prompts import MCQ_MATCH_JSON, McqChoice
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

KEY = install_test_key()
SCRIPT = {"second one": "B", "no idea": "none", "fourth": "D"}


def quoted(messages: list[dict]) -> str:
    m = re.search(r'"""\n(.*)\n"""', messages[-1]["content"], re.DOTALL)
    return m.group(1) if m else ""


def json_matcher(messages: list[dict]) -> str:
    """Answers {"choice": ...} for the scripted responses; anything else gets prose (invalid JSON)."""
    response = quoted(messages)
    return json.dumps({"choice": SCRIPT[response]}) if response in SCRIPT else f"I think: {response}"


def msgs(text: str) -> list[dict]:
    return MCQ_MATCH_JSON.render(question="Q?", a="w", b="x", c="y", d="z", response=text)


def client(srv: LLMServer, tmp_path, **kw) -> LLMClient:
    base = dict(base_url=srv.base_url, model="json-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                tpm=10_000_000, timeout_s=2.0, max_retries=2, max_tokens=16, backoff_base_s=0.01,
                backoff_max_s=0.05, json_retries=1)
    base.update(kw)
    return LLMClient(EndpointConfig(**base), cache=ResponseCache(str(tmp_path / "cache")))


def sent_formats(srv: LLMServer) -> list[str | None]:
    return [(json.loads(r.body).get("response_format") or {}).get("type") for r in srv.requests]


def test_json_schema_is_sent_validated_and_cached(tmp_path):
    with LLMServer(answer=json_matcher) as srv:
        c = client(srv, tmp_path)
        out = [c.complete_json(msgs(t), McqChoice, "mcq_match_json@1") for t in SCRIPT]
        n = len(srv.requests)
        again = [client(srv, tmp_path).complete_json(msgs(t), McqChoice, "mcq_match_json@1") for t in SCRIPT]
        body = json.loads(srv.requests[0].body)
    assert [o.data for o in out] == [{"choice": v} for v in SCRIPT.values()] == [o.data for o in again]
    assert n == 3 and len(srv.requests) == 3 and all(o.cached and o.attempts == 0 for o in again)
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["schema"]["properties"]["choice"]["enum"] == ["A", "B", "C", "D", "none"]
    assert body["temperature"] == 0.0 and body["seed"] == 0
    plain = client(srv, tmp_path).request_key(msgs("fourth"), "mcq_match_json@1")[0]
    assert plain != out[2].key  # the schema is part of the key: a text request never reuses a JSON answer


def test_fallback_to_json_object_then_prompt_and_the_same_cache_key(tmp_path):
    with LLMServer(answer=json_matcher, response_formats=("json_object",)) as srv:
        c = client(srv, tmp_path / "a")
        first, second = c.complete_json(msgs("second one"), McqChoice), c.complete_json(msgs("fourth"), McqChoice)
        formats_a, statuses_a = sent_formats(srv), [r.status for r in srv.requests]
    assert (first.data, second.data) == ({"choice": "B"}, {"choice": "D"})
    assert formats_a == ["json_schema", "json_object", "json_object"]  # stepped down once, remembered
    assert statuses_a == [400, 200, 200] and first.attempts == 2 and c.wire_format() == "json_object"

    with LLMServer(answer=json_matcher, response_formats=()) as srv:  # no response_format support at all
        c = client(srv, tmp_path / "a")  # same cache as above
        cached = c.complete_json(msgs("second one"), McqChoice)
        fresh = c.complete_json(msgs("no idea"), McqChoice)
        formats_b = sent_formats(srv)
    assert cached.cached and cached.key == first.key and cached.data == {"choice": "B"}  # key holds the schema
    assert fresh.data == {"choice": "none"} and formats_b == ["json_schema", "json_object", None]

    with LLMServer(answer=json_matcher, response_formats=("json_object",)) as srv:
        fixed = client(srv, tmp_path / "b", structured="json_schema").complete_json(msgs("fourth"), McqChoice)
    assert fixed.error.startswith("HTTP 400") and "'json_schema' is not supported" in fixed.error
    assert fixed.attempts == 1  # structured: json_schema given explicitly: no step-down, 400 is not retried


def test_invalid_json_is_retried_bounded_then_an_error_and_never_cached(tmp_path):
    calls: dict[str, int] = {}
    lock = threading.Lock()

    def flaky(messages: list[dict]) -> str:  # "fourth" is prose on its first call, JSON after
        response = quoted(messages)
        with lock:
            calls[response] = calls.get(response, 0) + 1
            n = calls[response]
        return "Option D, surely." if response == "fourth" and n == 1 else json_matcher(messages)

    with LLMServer(answer=flaky) as srv:
        c = client(srv, tmp_path, json_retries=2)
        out = complete_many(c, [msgs("fourth"), msgs("rambling"), msgs("second one")], threads=3,
                            schema=McqChoice)
        n = len(srv.requests)
        again = complete_many(c, [msgs("fourth"), msgs("rambling")], threads=2, schema=McqChoice)
    assert out[0].data == {"choice": "D"} and out[0].attempts == 2
    assert out[1].text is None and out[1].data is None and out[1].attempts == 3  # 1 + json_retries
    assert out[1].error.startswith("invalid output: (root): Invalid JSON") and "I think: rambling" in out[1].error
    assert out[2].data == {"choice": "B"} and n == 2 + 3 + 1
    assert again[0].cached and not again[1].cached and again[1].error.startswith("invalid output")
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 2  # the invalid answer was never cached


def test_mcq_llm_json_output_online_and_batch(tmp_path):
    texts = ["second one", "no idea", "fourth", "rambling", None]
    options = [["w", "x", "y", "z"], ["w", "x"], ["w", "x", "y"], ["w", "x"], ["w", "x"]]
    with LLMServer(answer=json_matcher) as srv:
        p = dict(base_url=srv.base_url, model="judge-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                 tpm=10_000_000, timeout_s=2.0, max_retries=1, backoff_base_s=0.01, backoff_max_s=0.05,
                 json_retries=1)
        online = McqLLMJudge(output="json", cache_root=str(tmp_path / "online"), **p).judge(texts, options)
        n_online = len(srv.requests)
        judge = McqLLMJudge(output="json", mode="batch", batch_poll_s=0.01, batch_timeout_s=30,
                            cache_root=str(tmp_path / "batch"), **p)
        batch = judge.judge(texts, options)
        lines = [json.loads(x) for f in srv.files.values() if f["purpose"] == "batch"
                 for x in f["content"].decode().splitlines()]
        text_judge = McqLLMJudge(cache_root=str(tmp_path / "online"), **p)
    # "fourth" → D, but the item has three options: unanswered (-1), as on the text path
    assert [r.get("parsed_index") for r in online] == [1, -1, -1, None, None]
    assert online[3]["error"].startswith("invalid output:") and online[4]["error"] == "no response"
    assert n_online == 3 + 2  # the invalid item: 1 + json_retries calls
    assert online[3]["error"].endswith(" (after 2 attempts)")  # online: the invalid answer and its retry
    online[3]["error"] = online[3]["error"].removesuffix(" (after 2 attempts)")
    assert batch == online and judge.version == "1+mcq_match_json@1" and text_judge.version == "1+mcq_match@1"
    assert len(lines) == 4 and all(ln["body"]["response_format"]["type"] == "json_schema" for ln in lines)
    assert lines[0]["body"]["messages"][0]["content"] == MCQ_MATCH_JSON.system


def test_batch_lines_are_validated_and_share_keys_with_online(tmp_path):
    reqs = [{"messages": msgs(t), "template_version": "mcq_match_json@1", "schema": McqChoice}
            for t in ("second one", "rambling")]
    with LLMServer(answer=json_matcher) as srv:
        out = run_batch(client(srv, tmp_path), reqs, poll_interval_s=0.01, timeout_s=30)
        online = client(srv, tmp_path).complete_json(msgs("second one"), McqChoice, "mcq_match_json@1")
    assert out[0].data == {"choice": "B"} and online.cached and online.key == out[0].key
    assert out[1].text is None and out[1].error.startswith("invalid output:")
