"""OpenAI Batch API mode (evalcore.llm.batch) with the real openai client against tests/llm_server.py."""

from __future__ import annotations

import hashlib
import json
import pathlib

import pytest

from evalcore.llm.batch import run_batch
from evalcore.llm.budget import TokenBucketBudget
from evalcore.llm.cache import RequestLog, ResponseCache
from evalcore.llm.client import EndpointConfig, LLMClient
from llm_server import TEST_API_KEY_ENV, LLMServer, default_answer, install_test_key

KEY = install_test_key()


def msgs(i: int) -> list[dict]:
    return [{"role": "system", "content": "You are a judge."}, {"role": "user", "content": f"batch item {i}"}]


def config(srv: LLMServer, **kw) -> EndpointConfig:
    base = dict(base_url=srv.base_url, model="batch-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                tpm=10_000_000, timeout_s=5.0, max_retries=2, max_tokens=16, backoff_base_s=0.01, backoff_max_s=0.05)
    base.update(kw)
    return EndpointConfig(**base)


def client(srv: LLMServer, tmp: pathlib.Path, **kw) -> LLMClient:
    cfg = config(srv, **kw)
    return LLMClient(cfg, TokenBucketBudget(cfg.rpm, cfg.tpm), cache=ResponseCache(str(tmp / "cache")),
                     log=RequestLog(str(tmp / "logs" / "run.jsonl")))


def input_lines(srv: LLMServer) -> list[dict]:
    files = [f for f in srv.files.values() if f["purpose"] == "batch"]
    return [json.loads(line) for f in files for line in f["content"].decode().splitlines()]


def test_cached_keys_not_submitted_results_in_order(tmp_path):
    with LLMServer(batch_polls=3) as srv:
        c = client(srv, tmp_path)
        online = [c.complete(msgs(i)) for i in (0, 2, 4)]  # cached by the online path
        n_online = len(srv.requests)
        reqs = [msgs(i) for i in range(8)] + [msgs(5), {"messages": msgs(6)}]  # duplicates
        out = run_batch(c, reqs, poll_interval_s=0.01, timeout_s=30)
        paths = srv.paths()[n_online:]
        lines = input_lines(srv)
        batch = next(iter(srv.batches.values()))
    assert [o.text for o in out] == [default_answer(m) for m in [msgs(i) for i in range(8)] + [msgs(5), msgs(6)]]
    assert [o.cached for o in out] == [i in (0, 2, 4) for i in range(8)] + [False, False]
    assert [o.key for o in online] == [out[i].key for i in (0, 2, 4)]
    assert all(o.error is None and (o.usage or {}).get("total_tokens") for o in out)
    # only the 5 distinct uncached keys were submitted, one line each, custom_id = cache key
    assert sorted(ln["custom_id"] for ln in lines) == sorted(out[i].key for i in (1, 3, 5, 6, 7))
    assert all(ln["method"] == "POST" and ln["url"] == "/v1/chat/completions" for ln in lines)
    body = lines[0]["body"]
    assert (body["model"], body["temperature"], body["seed"], body["max_tokens"]) == ("batch-model", 0.0, 0, 16)
    assert (batch["endpoint"], batch["completion_window"], batch["status"]) == ("/v1/chat/completions", "24h",
                                                                                "completed")
    kinds = [p.split(" ")[0] + " " + p.split("/")[2] for p in paths]
    assert kinds == ["POST files", "POST batches", "GET batches", "GET batches", "GET batches", "GET files"]


def test_second_run_makes_zero_calls_and_shares_the_online_cache(tmp_path):
    reqs = [{"messages": msgs(i), "template_version": "mcq_match@1"} for i in range(6)]
    with LLMServer() as srv:
        first = run_batch(config(srv), reqs, poll_interval_s=0.01, timeout_s=30, cache_root=str(tmp_path / "c"))
        n1 = len(srv.requests)
        second = run_batch(config(srv), reqs, poll_interval_s=0.01, timeout_s=30, cache_root=str(tmp_path / "c"))
        n2 = len(srv.requests)
        c = LLMClient(config(srv), cache=ResponseCache(str(tmp_path / "c")))
        online = c.complete(msgs(3), template_version="mcq_match@1")
        other_version = run_batch(c, [{"messages": msgs(3), "template_version": "mcq_match@2"}],
                                  poll_interval_s=0.01, timeout_s=30)
        n3 = len(srv.requests)
    assert n1 > 0 and n2 == n1  # zero calls on the re-run
    assert not any(o.cached for o in first) and all(o.cached and o.attempts == 0 for o in second)
    assert [o.text for o in first] == [o.text for o in second] == [default_answer(msgs(i)) for i in range(6)]
    assert online.cached and online.text == default_answer(msgs(3)) and n3 > n2  # version is in the key
    assert not other_version[0].cached and other_version[0].key != online.key


def test_failed_http500_and_missing_lines_become_error_completions(tmp_path):
    faults = {1: "error", 2: "http500", 4: "missing"}
    reqs = [msgs(i) for i in range(6)]
    with LLMServer(batch_line_faults=faults) as srv:
        c = client(srv, tmp_path)
        out = run_batch(c, reqs, poll_interval_s=0.01, timeout_s=30)
        lines = input_lines(srv)
        by_line = {ln["custom_id"]: i for i, ln in enumerate(lines)}
        srv.batch_line_faults = {}
        retry = run_batch(c, reqs, poll_interval_s=0.01, timeout_s=30)
        resubmitted = input_lines(srv)[len(lines):]
    assert len(out) == 6  # nothing dropped
    errors = {by_line[o.key]: o.error for o in out if o.error}
    assert set(errors) == {1, 2, 4}
    assert errors[1] == "batch line error: injected_error: injected line failure"
    assert errors[2] == "HTTP 500: The server had an error"
    assert errors[4].startswith("missing from the output of batch batch_")
    assert all(o.text == default_answer(reqs[i]) for i, o in enumerate(out) if by_line[o.key] not in errors)
    assert all(o.text is None and o.attempts == 1 for o in out if o.error)
    # errors are not cached: the re-run submits exactly the three failed requests
    assert sorted(ln["custom_id"] for ln in resubmitted) == sorted(o.key for o in out if o.error)
    assert [o.text for o in retry] == [default_answer(m) for m in reqs]
    log = [json.loads(x) for x in (tmp_path / "logs" / "run.jsonl").read_text().splitlines()]
    assert sum(1 for e in log if e.get("error") and e["key"]) == 3


@pytest.mark.parametrize("outcome", ["failed", "expired"])
def test_failed_or_expired_batch(tmp_path, outcome):
    reqs = [msgs(i) for i in range(6)]
    with LLMServer(batch_outcome=outcome) as srv:
        out = run_batch(client(srv, tmp_path), reqs, poll_interval_s=0.01, timeout_s=30)
        lines = input_lines(srv)
    assert len(out) == 6
    if outcome == "failed":
        assert all(o.text is None and "failed: invalid_request: injected batch failure" in o.error for o in out)
    else:  # the server answers the first half of the input file, then expires
        first_half = {ln["custom_id"] for ln in lines[:3]}
        assert all((o.text is not None) == (o.key in first_half) for o in out)
        assert all("ended expired" in o.error for o in out if o.text is None)


def test_poll_timeout_cancels_the_batch(tmp_path):
    with LLMServer(batch_polls=10**9) as srv:
        out = run_batch(client(srv, tmp_path), [msgs(0), msgs(1)], poll_interval_s=0.05, timeout_s=0.3)
        batch = next(iter(srv.batches.values()))
        polls = sum(p.startswith("GET") for p in srv.paths())
    assert all(o.text is None and "not finished after 0.3s" in o.error for o in out)
    assert batch["status"] == "cancelled" and 2 <= polls <= 12  # bounded


def test_missing_key_and_upload_failure_are_error_completions(tmp_path, monkeypatch):
    monkeypatch.delenv("EVALCORE_NO_SUCH_KEY", raising=False)
    with LLMServer() as srv:
        out = run_batch(client(srv, tmp_path, api_key_env="EVALCORE_NO_SUCH_KEY"), [msgs(0)], poll_interval_s=0.01)
        assert srv.requests == [] and out[0].error == "environment variable EVALCORE_NO_SUCH_KEY is not set"
    with LLMServer() as srv:
        url = srv.base_url
    out = run_batch(client(srv, tmp_path, base_url=url, max_retries=1, timeout_s=0.5), [msgs(0), msgs(1)],
                    poll_interval_s=0.01, timeout_s=5)  # server gone: connection refused
    assert all(o.text is None and o.error.startswith("could not upload the input file: connection error")
               for o in out) and out[0].attempts == 0


def test_api_key_appears_in_no_file_written(tmp_path):
    with LLMServer(batch_line_faults={0: "error", 1: "http500"}) as srv:
        c = client(srv, tmp_path)
        out = run_batch(c, [msgs(i) for i in range(5)], poll_interval_s=0.01, timeout_s=30)
        again = run_batch(c, [msgs(i) for i in range(5)], poll_interval_s=0.01, timeout_s=30)  # same faults
        c.log.close()
        uploaded = [f["content"] for f in srv.files.values()]
        recorded = list(srv.requests)
    assert sum(o.error is not None for o in out) == sum(o.error is not None for o in again) == 2
    secret = KEY.encode()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files)
    assert len([p for p in files if p.suffix == ".json" and "llm-cache" in p.parts]) == 3
    states = [json.loads(p.read_text()) for p in files if "llm-batches" in p.parts]
    assert len(states) == 2 and all(s["status"] == "collected" for s in states)  # one record per batch
    assert not [p for p in files if secret in p.read_bytes()]
    assert not [u for u in uploaded if secret in u]
    for r in recorded:  # the key reached the server only as the Authorization header
        assert secret not in r.body and all(KEY not in v for v in r.headers.values())
        assert r.auth_sha256 == hashlib.sha256(secret).hexdigest()
    assert KEY not in json.dumps([o.to_dict() for o in out])
