"""Batch API mode: crash-safe submission (no second batch after a kill between create and record)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from evalcore.llm.batch import STATE_DIR, SUBMIT_PREFIX, run_batch
from evalcore.llm.client import EndpointConfig
from llm_server import BATCH_POLLER as POLLER
from llm_server import TEST_API_KEY_ENV, LLMServer, default_answer, install_test_key

KEY = install_test_key()


def msgs(i: int) -> list[dict]:
    return [{"role": "user", "content": f"submit item {i}"}]


def cfg(srv: LLMServer, **kw) -> dict:
    base = dict(base_url=srv.base_url, model="batch-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                tpm=10_000_000, timeout_s=30.0, max_retries=1, max_tokens=16, backoff_base_s=0.01,
                backoff_max_s=0.05)
    return {**base, **kw}


def count(srv: LLMServer, prefix: str) -> int:
    return sum(p.startswith(prefix) for p in srv.paths())


def records(root: pathlib.Path) -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((root / STATE_DIR).glob("*.json"))}


def test_killed_between_create_and_record_adopts_the_batch_on_restart(tmp_path):
    reqs = [msgs(i) for i in range(6)]
    root = tmp_path / "cache"
    with LLMServer(batch_polls=1) as srv:
        srv.hold_batch_create = True  # the server creates the batch, the poller never sees its id
        proc = subprocess.Popen([sys.executable, "-c", POLLER, json.dumps(cfg(srv)), json.dumps(reqs), str(root)],
                                env=os.environ.copy(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not srv.batches:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
                time.sleep(0.02)
        finally:
            proc.send_signal(signal.SIGKILL)  # no cleanup: the create's response is never read
            proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        killed = {"uploads": count(srv, "POST /v1/files"), "creates": count(srv, "POST /v1/batches")}
        [(name, sub)] = records(root).items()  # only the submission record: the batch was never recorded
        [batch] = srv.batches.values()
        assert killed == {"uploads": 1, "creates": 1}
        assert name.startswith(SUBMIT_PREFIX) and sub["status"] == "submitting"
        assert sub["input_file_id"] == batch["input_file_id"] and len(sub["keys"]) == 6 and KEY not in json.dumps(sub)

        srv.hold_batch_create = False
        srv.release_batch_create()
        out = run_batch(EndpointConfig(**cfg(srv)), reqs, poll_interval_s=0.01, timeout_s=30, cache_root=str(root))
        after = {"uploads": count(srv, "POST /v1/files"), "creates": count(srv, "POST /v1/batches"),
                 "lookups": count(srv, "GET /v1/batches?")}
        n = len(srv.requests)
        again = run_batch(EndpointConfig(**cfg(srv)), reqs, poll_interval_s=0.01, timeout_s=30, cache_root=str(root))
        n_again = len(srv.requests)
    print(f"after the kill: {killed}; after the restart: {after}")
    assert [o.text for o in out] == [default_answer(m) for m in reqs] and all(o.error is None for o in out)
    assert after["uploads"] == 1 and after["creates"] == 1 and after["lookups"] >= 1  # adopted, not resubmitted
    recs = records(root)
    assert list(recs) == [f"{batch['id']}.json"] and recs[f"{batch['id']}.json"]["status"] == "collected"
    assert recs[f"{batch['id']}.json"]["input_file_id"] == batch["input_file_id"]
    assert KEY not in json.dumps(recs)
    assert n_again == n and all(o.cached for o in again)  # a third run makes zero calls


def test_create_that_timed_out_is_looked_up_before_it_is_retried(tmp_path):
    reqs = [msgs(i) for i in range(3)]
    with LLMServer(batch_polls=1) as srv:
        srv.hold_batch_create = True  # the create reaches the server but its response comes too late
        c = cfg(srv, timeout_s=0.5, max_retries=2)
        out = run_batch(EndpointConfig(**c), reqs, poll_interval_s=0.01, timeout_s=30, cache_root=str(tmp_path))
        srv.release_batch_create()
        creates, batches = count(srv, "POST /v1/batches"), len(srv.batches)
    assert [o.text for o in out] == [default_answer(m) for m in reqs]
    assert creates == 1 and batches == 1
    assert [r["status"] for r in records(tmp_path).values()] == ["collected"]


def test_uncreated_submission_reuses_the_uploaded_file(tmp_path):
    reqs = [msgs(i) for i in range(4)]
    with LLMServer(batch_polls=1) as srv:
        srv.fail_batch_creates = 10  # every create of the first call fails: nothing is created
        first = run_batch(EndpointConfig(**cfg(srv)), reqs, poll_interval_s=0.01, timeout_s=30,
                          cache_root=str(tmp_path))
        [sub] = records(tmp_path).values()  # the server may have created it: the record is kept
        srv.fail_batch_creates = 0
        out = run_batch(EndpointConfig(**cfg(srv)), reqs, poll_interval_s=0.01, timeout_s=30,
                        cache_root=str(tmp_path))
        uploads, batches = count(srv, "POST /v1/files"), list(srv.batches.values())
    assert all(o.error and "HTTP 503" in o.error for o in first)
    assert sub["status"] == "submitting"
    assert [o.text for o in out] == [default_answer(m) for m in reqs]
    assert uploads == 1 and len(batches) == 1 and batches[0]["input_file_id"] == sub["input_file_id"]
    assert [r["status"] for r in records(tmp_path).values()] == ["collected"]


def test_partly_wanted_or_refused_submissions_are_dropped_and_their_keys_submitted_anew(tmp_path):
    with LLMServer(batch_polls=1) as srv:
        srv.fail_batch_creates = 10
        run_batch(EndpointConfig(**cfg(srv)), [msgs(i) for i in range(4)], poll_interval_s=0.01, timeout_s=30,
                  cache_root=str(tmp_path))
        [old] = records(tmp_path).values()
        srv.fail_batch_creates = 0
        # a later call wanting only half of that file's keys does not pay for the other half
        out = run_batch(EndpointConfig(**cfg(srv)), [msgs(0), msgs(1)], poll_interval_s=0.01, timeout_s=30,
                        cache_root=str(tmp_path))
        [batch] = srv.batches.values()
        lines = srv.files[batch["input_file_id"]]["content"].decode().splitlines()
        after_partial = records(tmp_path)
        # a submission whose file the server no longer has: the create is refused (400), so it is dropped
        gone = {**old, "input_file_id": "file-gone", "keys": [old["keys"][3]]}
        (tmp_path / STATE_DIR / f"{SUBMIT_PREFIX}gone.json").write_text(json.dumps(gone))
        last = run_batch(EndpointConfig(**cfg(srv)), [msgs(3)], poll_interval_s=0.01, timeout_s=30,
                         cache_root=str(tmp_path))
        n_batches = len(srv.batches)
    assert [o.text for o in out] == [default_answer(msgs(i)) for i in range(2)]
    assert len(lines) == 2 and batch["input_file_id"] != old["input_file_id"]
    assert [r["status"] for r in after_partial.values()] == ["collected"]  # the partly wanted one was dropped
    assert last[0].text == default_answer(msgs(3)) and last[0].key == old["keys"][3] and n_batches == 2
    assert not any(n.startswith(SUBMIT_PREFIX) for n in records(tmp_path))
