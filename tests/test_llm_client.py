"""LLMClient over real HTTP (the real ``openai`` package) against tests/llm_server.py."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import pickle
import threading

import pytest

from evalcore.llm.actors import complete_many
from evalcore.llm.budget import TokenBucketBudget
from evalcore.llm.cache import RequestLog, ResponseCache, cache_key
from evalcore.llm.client import EndpointConfig, LLMClient, parse_duration, retry_after_s
from llm_server import TEST_API_KEY_ENV, Fault, FaultSchedule, LLMServer, default_answer, install_test_key

KEY = install_test_key()


def msgs(i: int) -> list[dict]:
    return [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": f"item {i}"}]


def make_client(srv: LLMServer, tmp: pathlib.Path | None = None, **cfg) -> LLMClient:
    base = dict(base_url=srv.base_url, model="test-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                tpm=10_000_000, timeout_s=2.0, max_retries=3, max_tokens=32, backoff_base_s=0.02,
                backoff_max_s=0.2, max_budget_wait_s=30)
    base.update(cfg)
    config = EndpointConfig(**base)
    cache = ResponseCache(str(tmp / "cache")) if tmp else None
    log = RequestLog(str(tmp / "logs" / "run.jsonl")) if tmp else None
    return LLMClient(config, TokenBucketBudget(config.rpm, config.tpm), cache=cache, log=log)


def test_deterministic_answers_and_params_sent():
    with LLMServer() as srv:
        client = make_client(srv)
        a, b, a2 = client.complete(msgs(1)), client.complete(msgs(2)), client.complete(msgs(1))
    assert a.text == default_answer(msgs(1)) == a2.text and b.text == default_answer(msgs(2)) != a.text
    assert (a.attempts, a.cached, a.error) == (1, False, None)
    assert a.usage and a.usage["total_tokens"] == a.usage["prompt_tokens"] + a.usage["completion_tokens"] > 0
    body = json.loads(srv.requests[0].body)
    assert (body["temperature"], body["seed"], body["max_tokens"], body["model"]) == (0.0, 0, 32, "test-model")
    assert srv.requests[0].headers.get("x-stainless-retry-count") == "0"


def test_429_retry_after_is_honoured():
    with LLMServer(faults=FaultSchedule(by_index={0: Fault("429", 0.6)})) as srv:
        c = make_client(srv).complete(msgs(0))
    assert c.text == default_answer(msgs(0)) and c.attempts == 2
    gap = srv.requests[1].t - srv.requests[0].t
    assert gap >= 0.6, gap  # waited retry-after-ms, not the 20 ms backoff


def test_500s_are_retried():
    with LLMServer(faults=FaultSchedule(by_index={0: Fault("500"), 1: Fault("500")})) as srv:
        c = make_client(srv).complete(msgs(0))
    assert (c.text, c.attempts, c.error) == (default_answer(msgs(0)), 3, None)
    assert [r.status for r in srv.requests] == [500, 500, 200]


def test_timeouts_retried_then_error_row():
    with LLMServer(faults=FaultSchedule(probabilities={"hang": 1.0}, seconds={"hang": 3.0})) as srv:
        c = make_client(srv, timeout_s=0.3, max_retries=2).complete(msgs(0))
        n = len(srv.requests)
    assert c.text is None and c.attempts == 3 and "timeout" in c.error
    assert n == 3


def test_slow_response_within_timeout_succeeds():
    with LLMServer(faults=FaultSchedule(by_index={0: Fault("slow", 0.3)})) as srv:
        c = make_client(srv, timeout_s=1.0).complete(msgs(0))
    assert c.text == default_answer(msgs(0)) and c.attempts == 1


def test_malformed_json_retried_then_error_row():
    with LLMServer(faults=FaultSchedule(by_index={0: Fault("malformed")})) as srv:
        ok = make_client(srv).complete(msgs(0))
    assert ok.text == default_answer(msgs(0)) and ok.attempts == 2
    with LLMServer(faults=FaultSchedule(probabilities={"malformed": 1.0})) as srv:
        bad = make_client(srv, max_retries=1).complete(msgs(0))
    assert bad.text is None and bad.attempts == 2 and bad.error.startswith("bad response")


def test_missing_key_is_an_error_row_without_calls(monkeypatch):
    monkeypatch.delenv("EVALCORE_NO_SUCH_KEY", raising=False)
    with LLMServer() as srv:
        c = make_client(srv, api_key_env="EVALCORE_NO_SUCH_KEY").complete(msgs(0))
    assert c.text is None and "EVALCORE_NO_SUCH_KEY" in c.error and srv.requests == []


def test_zero_lost_items_with_random_faults():
    faults = FaultSchedule(
        probabilities={"429": 0.05, "500": 0.06, "slow": 0.05, "hang": 0.03, "malformed": 0.05},
        seed=7, seconds={"429": 0.1, "slow": 0.05, "hang": 1.0},
    )
    n = 200
    with LLMServer(faults=faults) as srv:
        client = make_client(srv, timeout_s=0.4, max_retries=6)
        out = complete_many(client, [msgs(i) for i in range(n)], threads=16)
        statuses = srv.statuses()
    assert len(out) == n
    assert all((c.text is None) != (c.error is None) for c in out)  # text XOR error, per item
    assert [c.text for c in out if c.text] == [default_answer(msgs(i)) for i, c in enumerate(out) if c.text]
    assert sum(c.error is not None for c in out) <= 2
    assert statuses[500] > 0 and statuses[429] > 0  # faults did happen
    assert sum(c.attempts for c in out) == len(srv.requests)  # every HTTP call is accounted for


def test_cached_rerun_makes_zero_calls(tmp_path):
    reqs = [msgs(i) for i in range(20)]
    with LLMServer() as srv:
        first = complete_many(make_client(srv, tmp_path), reqs, threads=4)
        n_first = len(srv.requests)
        second = complete_many(make_client(srv, tmp_path), reqs, threads=4)
        n_second = len(srv.requests)
        other = make_client(srv, tmp_path).complete(msgs(0), template_version="mcq_match@2")
    assert n_first == 20 and n_second == 20  # zero calls on the re-run
    assert all(c.cached and c.attempts == 0 for c in second) and not any(c.cached for c in first)
    assert [c.text for c in first] == [c.text for c in second]
    assert not other.cached and len(srv.requests) == 21  # template version is part of the key
    files = list((tmp_path / "cache" / "llm-cache").rglob("*.json"))
    assert len(files) == 21 and all(f.parent.name == f.stem[:2] for f in files)


def test_cache_key_is_canonical():
    m = [{"role": "user", "content": "hé"}]
    assert cache_key("m", m, {"a": 1, "b": 2}, "t@1") == cache_key("m", m, {"b": 2, "a": 1}, "t@1")
    assert cache_key("m", m, {"a": 1}, "t@1") != cache_key("m", m, {"a": 1}, "t@2")
    assert cache_key("m", m, {"a": 1}) != cache_key("m2", m, {"a": 1})


def test_concurrent_writers_same_key(tmp_path):
    cache = ResponseCache(str(tmp_path))
    record = {"text": "x" * 100_000, "usage": None}

    def put() -> None:
        for _ in range(20):
            cache.put("ab" + "0" * 62, record)
            got = cache.get("ab" + "0" * 62)
            assert got is None or got["text"] == record["text"]

    threads = [threading.Thread(target=put) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert cache.get("ab" + "0" * 62)["text"] == record["text"]
    assert [p.name for p in (tmp_path / "llm-cache" / "ab").iterdir()] == ["ab" + "0" * 62 + ".json"]


def test_api_key_leaks_nowhere(tmp_path):
    faults = FaultSchedule(by_index={1: Fault("500"), 3: Fault("malformed"), 5: Fault("429", 0.05)})
    with LLMServer(faults=faults) as srv:
        client = make_client(srv, tmp_path)
        out = complete_many(client, [msgs(i) for i in range(10)], threads=2)
        client.log.close()
    assert all(c.text for c in out)
    secret = KEY.encode()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files) and any(p.suffix == ".json" for p in files)
    assert not [p for p in files if secret in p.read_bytes()]
    log_lines = (tmp_path / "logs" / "run.jsonl").read_text().splitlines()
    assert len(log_lines) == 13 and sum('"error"' in line for line in log_lines) == 3
    for r in srv.requests:  # the key reached the server only as the Authorization header
        assert secret not in r.body and all(KEY not in v for v in r.headers.values())
        assert r.auth_sha256 == hashlib.sha256(secret).hexdigest()
    state = {k: v for k, v in client.__getstate__().items() if k != "budget"}  # (in-process lock)
    assert secret not in pickle.dumps(state) and secret not in pickle.dumps(out)
    assert client.openai_client.api_key != KEY
    assert KEY not in repr(client.config) and KEY not in json.dumps([c.to_dict() for c in out])


def test_header_parsing():
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "3"}) == 0.25
    assert retry_after_s({"retry-after": "2"}) == 2.0 and retry_after_s({}) is None
    assert parse_duration("6m0s") == 360 and parse_duration("20ms") == 0.02 and parse_duration("1.5s") == 1.5
    assert parse_duration("soon") is None


def test_config_forbids_extra_and_holds_no_key():
    with pytest.raises(Exception):
        EndpointConfig(base_url="http://127.0.0.1:1/v1", model="m", rpm=1, tpm=1, api_key="sk-x")
    cfg = EndpointConfig(base_url="http://127.0.0.1:1/v1", model="m", rpm=1, tpm=1)
    assert cfg.api_key_env == "OPENAI_API_KEY" and os.environ.get(TEST_API_KEY_ENV) == KEY
