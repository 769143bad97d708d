"""Resumable runs: committed shards, and a real `evalcore run` killed with SIGKILL, then resumed.

The kill test runs the CLI in a subprocess with a slow test-only model (see ``resume_helpers``) that
logs a fingerprint of every input it is called on and answers with that fingerprint. After the kill
the committed rows are read; the resumed run must call the model on exactly the rows not committed.
The same scenario on an S3 run root is in ``test_resume_s3.py``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time

import pyarrow.parquet as pq
import pytest
import yaml

import resume_helpers as rh
from evalcore.core import storage
from evalcore.runconfig.config import parse_config
from evalcore.pipeline import commit
from evalcore.pipeline.commit import RunStateError, ShardWriter
from evalcore.pipeline.resume import open_run, resume_config


def _row(rid: str, chunk: int = 0, n: int = 1, **kw) -> dict:
    return {"request_id": rid, "dataset": "d", "item_id": rid, "protocol": "factual", "model": "m",
            "condition": "correct", "variant": "default", "option_order": 0, "chunk_index": chunk, "n_chunks": n,
            "text": f"{rid}/{chunk}", "error": None, "error_stage": None, "judge": "lexicon@1", **kw}


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


# ----------------------------------------------------------------------------- shards and commits


def test_writer_commits_complete_requests_only(tmp_path):
    out = storage.RunStorage(str(tmp_path))
    clock = _Clock()
    w = ShardWriter(out, shard_rows=100, every_s=5.0, clock=clock)
    w.add([_row("a"), _row("b", 0, 3), _row("b", 1, 3)])
    assert w.shards == []  # nothing due yet
    clock.t = 6.0
    w.add([_row("c", 0, 2)])
    assert len(w.shards) == 1 and w.rows_committed == 1  # only "a" is complete
    (rows,) = [commit.load_committed(str(tmp_path)).rows]
    assert [(r["request_id"], r["chunk_index"], r["judge"]) for r in rows] == [("a", 0, "lexicon@1")]
    w.add([_row("b", 2, 3), _row("c", 1, 2)])
    w.close()
    got = commit.load_committed(str(tmp_path))
    assert [(r["request_id"], r["chunk_index"]) for r in got.rows] == [("a", 0), ("b", 0), ("b", 1), ("b", 2),
                                                                     ("c", 0), ("c", 1)]
    assert got.request_ids == {"a", "b", "c"} and len(got.shards) == 2


def test_shard_key_is_content_derived_and_marker_is_last(tmp_path):
    rows = [_row("x"), _row("y", 0, 2), _row("y", 1, 2)]
    assert commit.shard_key(rows) == commit.shard_key(rows[::-1]) != commit.shard_key(rows[:1])
    key = commit.commit_shard(storage.RunStorage(str(tmp_path)), rows)
    assert key == commit.shard_key(rows)
    files = [tmp_path / "responses" / f"{key}.parquet", tmp_path / "judgments" / f"{key}.parquet",
             tmp_path / "_commits" / f"shard-{key}.json"]
    assert all(f.exists() for f in files)
    assert files[2].stat().st_mtime_ns >= max(f.stat().st_mtime_ns for f in files[:2])
    assert json.loads(files[2].read_text())["rows"] == 3


def test_close_turns_missing_chunks_into_error_rows(tmp_path):
    w = ShardWriter(storage.RunStorage(str(tmp_path)), every_s=1e9)
    w.add([_row("a"), _row("b", 1, 3)])
    w.close()
    rows = {r["request_id"]: r for r in commit.load_committed(str(tmp_path)).rows}
    assert rows["a"]["error"] is None
    assert rows["b"]["error"] == "incomplete: 1 of 3 chunks came back from the pipeline"
    assert rows["b"]["error_stage"] == "pipeline" and rows["b"]["n_chunks"] == 1


def test_failed_stream_commits_what_is_complete(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with ShardWriter(storage.RunStorage(str(tmp_path)), every_s=1e9) as w:
            w.add([_row("a"), _row("b", 0, 2)])
            raise KeyboardInterrupt
    assert commit.load_committed(str(tmp_path)).request_ids == {"a"}  # b is redone by --resume


def test_uncommitted_files_are_ignored_and_cleaned(tmp_path):
    out = storage.RunStorage(str(tmp_path))
    commit.commit_shard(out, [_row("a")])
    # a killed attempt: data written, marker not yet (and a half-written temporary file)
    orphan = commit.shard_key([_row("b")])
    for d in ("responses", "judgments"):
        storage.write_bytes(str(tmp_path / d / f"{orphan}.parquet"), (tmp_path / d).iterdir().__next__().read_bytes())
    (tmp_path / "responses" / ".x.parquet.tmp-123").write_bytes(b"half")
    (tmp_path / "_commits" / ".shard-y.json.tmp-1").write_text("{")
    assert commit.load_committed(str(tmp_path)).request_ids == {"a"}
    gone = commit.clean_uncommitted(out)
    assert len(gone) == 4
    assert sorted(p.name for p in (tmp_path / "responses").iterdir()) == [f"{commit.shard_key([_row('a')])}.parquet"]
    assert pq.read_table(tmp_path / "responses").num_rows == 1  # the directory now reads as committed


def test_damaged_commits_are_refused(tmp_path):
    out = storage.RunStorage(str(tmp_path))
    key = commit.commit_shard(out, [_row("a"), _row("b")])
    marker = tmp_path / "_commits" / f"shard-{key}.json"
    m = json.loads(marker.read_text())
    marker.write_text(json.dumps({**m, "rows": 3}))
    with pytest.raises(RunStateError, match=f"shard {key} is damaged: marker says 3 rows"):
        commit.load_committed(str(tmp_path))
    marker.write_text(json.dumps(m))
    commit.commit_shard(out, [_row("c", 0, 2)])  # a request committed without all its chunks
    with pytest.raises(RunStateError, match="lack some chunks"):
        commit.load_committed(str(tmp_path))


# ----------------------------------------------------------------------------- run roots and configs


def _cfg(root, **top) -> dict:
    return {"name": "r", "datasets": [{"name": "d", "kind": "synthetic", "params": {"n_clips": 4}}],
            "models": [{"name": "m", "kind": "text_prior"}], "protocols": [{"name": "factual"}],
            "storage": {"root": str(root)}, **top}


def test_resume_config_must_agree(tmp_path):
    root = tmp_path / "run"
    with pytest.raises(RunStateError, match="holds no run"):
        resume_config(str(root))
    cfg = parse_config(_cfg(root))
    open_run(cfg, resume=False)
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    got = resume_config(str(moved))  # the run's own config, rooted where the run now is
    assert got.root == str(moved) and got.models == cfg.models
    same = parse_config(_cfg("elsewhere", ray={"address": "ray://head:10001"}))  # root and ray may differ
    assert resume_config(str(root), same).ray.address == "ray://head:10001"
    other = parse_config(_cfg(root, seeds={"noise": 1}, stats={"bootstrap_resamples": 200}))
    with pytest.raises(RunStateError, match=r"differs from the run's own config.yaml at seeds.noise, "
                                            r"stats.bootstrap_resamples;"):
        resume_config(str(root), other)


def test_fresh_run_refuses_an_unfinished_root_and_replaces_a_finished_one(tmp_path):
    cfg = parse_config(_cfg(tmp_path / "run"))
    out = open_run(cfg, resume=False)
    commit.commit_shard(out, [_row("a")])
    with pytest.raises(RunStateError, match=r"holds an unfinished run \(1 shard\(s\) committed\): resume it with "
                                            r"`evalcore run --resume "):
        open_run(cfg, resume=False)
    (tmp_path / "run" / "run.json").write_text("{}")  # finished
    open_run(cfg, resume=False)
    assert commit.shard_markers(cfg.root) == [] and not (tmp_path / "run" / "run.json").exists()
    assert not list((tmp_path / "run" / "responses").iterdir())


def test_cli_resume_arguments(tmp_path):
    from typer.testing import CliRunner

    from evalcore.cli import app, run

    runner = CliRunner()
    res = runner.invoke(app, ["run", "--resume", str(tmp_path / "a"), "--out", str(tmp_path / "b")])
    assert res.exit_code == 2 and "name different run roots" in res.output
    res = runner.invoke(app, ["run", "--resume", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "holds no run" in res.output
    import inspect

    assert inspect.signature(run).parameters["commit_every"].default.default == commit.COMMIT_SECONDS


# ----------------------------------------------------------------------------- kill -9 and resume

N_ITEMS = 32
FIRST_DELAY_S, RESUME_DELAY_S = "0.03", "0.005"  # the killed attempt slow enough to be killed mid-run


@pytest.fixture
def kill_setup(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="ecrs", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    env = rh.plugin_env(tmp_path / "plugin", ray_tmp)
    audio_dir, calls = tmp_path / "audio", tmp_path / "calls"
    audio_dir.mkdir(), calls.mkdir()
    uris = []
    for i in range(N_ITEMS):
        (audio_dir / f"c{i:02d}.wav").write_bytes(rh.clip(i))
        uris.append(str(audio_dir / f"c{i:02d}.wav"))
    (tmp_path / "items.jsonl").write_text(rh.jsonl(rh.items(uris)))
    cfg = rh.run_config("killme", str(tmp_path / "items.jsonl"), str(tmp_path / "run"), calls)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    try:
        yield tmp_path, env, ray_tmp
    finally:
        rh.kill_leftovers(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.mark.ray
def test_kill_9_then_resume_loses_nothing_and_repeats_no_committed_call(kill_setup):
    tmp, env, ray_tmp = kill_setup
    root = str(tmp / "run")
    t0 = time.monotonic()
    proc = rh.evalcore(str(tmp / "config.yaml"), "--commit-every", "0", env={**env, rh.DELAY_ENV: FIRST_DELAY_S},
                       cwd=tmp, name="first")
    rh.kill_at_first_commit(proc, root, tmp / "first.err")
    t_kill = time.monotonic() - t0
    rh.kill_leftovers(ray_tmp)  # its Ray workers may still be finishing a batch: stop them before reading the log
    killed = rh.after_kill(root, tmp / "calls", N_ITEMS)

    t1 = time.monotonic()
    proc = rh.evalcore("--resume", root, env={**env, rh.DELAY_ENV: RESUME_DELAY_S}, cwd=tmp, name="resume")
    proc.wait(timeout=240)
    t_resume = time.monotonic() - t1
    err = (tmp / "resume.err").read_text(errors="replace")
    assert proc.returncode == 0, err[-4000:]

    figures = rh.check_resumed(root, killed, tmp / "calls", err, N_ITEMS)
    figures.update(killed_after_s=round(t_kill, 1), resume_s=round(t_resume, 1))
    print("\nkill-and-resume figures (local root):", json.dumps(figures))
