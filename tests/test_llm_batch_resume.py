"""Batch API mode: a killed poller resumes its batch instead of resubmitting; judges and rewrites in batch mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from evalcore.judges.llm_judges import LLMExtractorJudge, McqLLMJudge
from evalcore.llm.batch import STATE_DIR, run_batch
from evalcore.llm.cache import ResponseCache, canonical_json
from evalcore.llm.client import EndpointConfig, LLMClient
from evalcore.models.base import AudioPrompt
from evalcore.models.reference_rewrite import ReferenceRewrite
from llm_server import BATCH_POLLER as POLLER
from llm_server import TEST_API_KEY_ENV, LLMServer, default_answer, install_test_key

KEY = install_test_key()


def msgs(i: int) -> list[dict]:
    return [{"role": "user", "content": f"resume item {i}"}]


def cfg(srv: LLMServer, **kw) -> dict:
    return dict(base_url=srv.base_url, model="batch-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                tpm=10_000_000, timeout_s=5.0, max_retries=1, max_tokens=16, backoff_base_s=0.01,
                backoff_max_s=0.05, **kw)


def count(srv: LLMServer, prefix: str) -> int:
    return sum(p.startswith(prefix) for p in srv.paths())


def states(root) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / STATE_DIR).glob("*.json"))]


def test_killed_poller_resumes_without_resubmitting(tmp_path):
    reqs = [msgs(i) for i in range(5)]
    root = tmp_path / "cache"
    with LLMServer(batch_polls=10**9) as srv:  # the batch never finishes while the first poller lives
        proc = subprocess.Popen([sys.executable, "-c", POLLER, json.dumps(cfg(srv)), json.dumps(reqs), str(root)],
                                env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (count(srv, "GET /v1/batches/") >= 2 and states(root)):
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                time.sleep(0.05)
        finally:
            proc.kill()  # SIGKILL: the poller dies without any cleanup
            proc.wait(timeout=10)
        assert count(srv, "POST /v1/batches") == 1 and count(srv, "GET /v1/batches/") >= 2
        [state] = states(root)
        assert state["status"] in ("validating", "in_progress") and len(state["keys"]) == 5
        assert KEY not in json.dumps(state)

        srv.batch_polls = 0  # the batch finishes; a restarted run must pick it up
        out = run_batch(EndpointConfig(**cfg(srv)), reqs, poll_interval_s=0.01, timeout_s=30, cache_root=str(root))
        uploads, creates = count(srv, "POST /v1/files"), count(srv, "POST /v1/batches")
        n = len(srv.requests)
        again = run_batch(EndpointConfig(**cfg(srv)), reqs, poll_interval_s=0.01, timeout_s=30, cache_root=str(root))
        n_again = len(srv.requests)
    assert [o.text for o in out] == [default_answer(m) for m in reqs] and all(o.error is None for o in out)
    assert uploads == 1 and creates == 1  # nothing was submitted again
    assert sorted(o.key for o in out) == sorted(state["keys"])
    assert [s["status"] for s in states(root)] == ["collected"]
    assert n_again == n and all(o.cached for o in again)  # a third run makes zero calls


def test_resume_takes_only_wanted_keys_and_resubmits_unknown_or_failed_batches(tmp_path):
    root = tmp_path / "cache"
    with LLMServer(batch_polls=1) as srv:
        c = LLMClient(EndpointConfig(**cfg(srv)), cache=ResponseCache(str(root)))
        keys = [c.request_key(msgs(i))[0] for i in range(4)]
        # a batch that finished while nobody polled, covering items 0-1 (+ one key nobody asks for now)
        done = run_batch(c, [msgs(0), msgs(1), msgs(9)], poll_interval_s=0.01, timeout_s=30)
        for p in (root / "llm-cache").rglob("*.json"):
            p.unlink()  # as if the poller died before caching anything
        [st] = states(root)
        (root / STATE_DIR / f"{st['batch_id']}.json").write_text(canonical_json({**st, "status": "in_progress"}))
        # a record of a batch the server does not know, covering items 2-3
        ghost = {**st, "batch_id": "batch_gone", "keys": keys[2:], "status": "in_progress", "submitted": 0}
        (root / STATE_DIR / "batch_gone.json").write_text(canonical_json(ghost))
        # another endpoint's record is never touched
        other = {**ghost, "batch_id": "batch_other", "model": "another-model"}
        (root / STATE_DIR / "batch_other.json").write_text(canonical_json(other))
        before = count(srv, "POST /v1/batches")
        out = run_batch(c, [msgs(i) for i in range(4)], poll_interval_s=0.01, timeout_s=30)
        created = count(srv, "POST /v1/batches") - before
        inputs = [f for f in srv.files.values() if f["purpose"] == "batch"]
    assert all(o.text for o in done)
    assert [o.text for o in out] == [default_answer(msgs(i)) for i in range(4)]
    assert created == 1  # only items 2-3 (the unknown batch) were submitted again
    assert sorted(json.loads(x)["custom_id"] for x in inputs[-1]["content"].decode().splitlines()) == sorted(keys[2:])
    by_id = {s["batch_id"]: s["status"] for s in states(root)}
    assert by_id["batch_gone"] == "not_found" and by_id[st["batch_id"]] == "collected"
    assert by_id["batch_other"] == "in_progress" and list(by_id.values()).count("collected") == 2


def echo(messages: list[dict]) -> str:
    m = re.search(r'"""\n(.*)\n"""', messages[-1]["content"], re.DOTALL)
    return m.group(1) if m else ""


def test_judges_and_rewrites_in_batch_mode_match_online_and_share_the_cache(tmp_path):
    texts = ["piano, kazoo", "drums", None]
    refs = ["A calm piano piece.", None, "Loud drums."]
    with LLMServer(answer=echo) as srv:
        p = dict(base_url=srv.base_url, model="judge-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                 tpm=10_000_000, timeout_s=2.0, max_retries=1, backoff_base_s=0.01, backoff_max_s=0.05,
                 batch_poll_s=0.01, batch_timeout_s=30)
        ext = LLMExtractorJudge(mode="batch", cache_root=str(tmp_path / "c"), **p).judge(texts, [None] * 3)
        mcq = McqLLMJudge(mode="batch", cache_root=str(tmp_path / "c"), **p).judge(["B", "none"], [["x", "y"]] * 2)
        rw = ReferenceRewrite(mode="paraphrase", api="batch", cache_root=str(tmp_path / "c"), **p)
        rewrites = rw.generate([AudioPrompt(None, 16_000, "q", r) for r in refs])
        n_batch = len(srv.requests)
        creates = count(srv, "POST /v1/batches")
        p.pop("batch_poll_s"), p.pop("batch_timeout_s")
        ext_online = LLMExtractorJudge(cache_root=str(tmp_path / "c"), **p).judge(texts, [None] * 3)
        mcq_online = McqLLMJudge(cache_root=str(tmp_path / "c"), **p).judge(["B", "none"], [["x", "y"]] * 2)
        rw_online = ReferenceRewrite(mode="paraphrase", cache_root=str(tmp_path / "c"), **p).generate(
            [AudioPrompt(None, 16_000, "q", refs[0])])
        n_online = len(srv.requests) - n_batch
    assert ext == ext_online == [{"extracted": ["piano"], "dropped": 1}, {"extracted": ["drums"], "dropped": 0},
                                 {"extracted": None, "error": "no response"}]
    assert mcq == mcq_online == [{"parsed_index": 1}, {"parsed_index": -1}]
    assert rewrites[0] == rw_online[0] == "A calm piano piece." and rewrites[2] == "Loud drums."
    assert str(rewrites[1]) == "no reference answer to rewrite"
    assert creates == 3 and n_online == 0  # one batch per call; the online runs are all cache hits
    assert {s["status"] for s in states(tmp_path / "c")} == {"collected"}
