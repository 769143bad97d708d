"""Resumable runs: committed shards, and a real `evalcore run` killed with SIGKILL, then resumed.

The kill test runs the CLI in a subprocess with a slow test-only model (registered from a
``sitecustomize`` module the test puts on PYTHONPATH, so the driver and every Ray worker see it) that
logs a fingerprint of every input it is called on and answers with that fingerprint. After the kill
the committed rows are read; the resumed run must call the model on exactly the rows not committed.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

from evalcore import storage
from evalcore.config import parse_config
from evalcore.pipeline import commit
from evalcore.pipeline.commit import RunStateError, ShardWriter
from evalcore.pipeline.resume import open_run, resume_config

REPO = Path(__file__).resolve().parents[1]


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

MODEL = '''
"""A slow test-only Music LM that logs a fingerprint of every input it generates for."""
import hashlib, json, os, time

from evalcore.registry import MODELS


def fingerprint(p) -> str:
    audio = b"none" if p.audio is None else p.audio.tobytes()
    return hashlib.sha1(p.prompt.encode() + b"|" + audio).hexdigest()[:16]


@MODELS.register("test_call_logger")
class CallLogger:
    sample_rate = 8000
    max_audio_seconds = 1.5

    def __init__(self, log_dir, delay_s=0.03, sample_rate=8000, max_audio_seconds=1.5):
        self.log_dir, self.delay_s = log_dir, delay_s
        self.sample_rate, self.max_audio_seconds = sample_rate, max_audio_seconds

    def info(self):
        return {"backend": "CallLogger"}

    def generate(self, batch):
        time.sleep(self.delay_s * len(batch))
        fps = [fingerprint(p) for p in batch]
        with open(os.path.join(self.log_dir, f"calls-{os.getpid()}.jsonl"), "a") as f:
            f.write("".join(json.dumps({"fp": fp}) + "\\n" for fp in fps))
            f.flush()
            os.fsync(f.fileno())
        return [f"heard {fp}" for fp in fps]
'''

N_ITEMS = 32
CONDITIONS = ["correct", "random", "noise", "text_only"]
N_REQUESTS = N_ITEMS * len(CONDITIONS)
N_ROWS = N_ITEMS * (3 * 2 + 1)  # 3 s clips in 1.5 s windows: 2 chunks for each audio condition, 1 for text_only


def _clip(seed: int) -> bytes:
    x = np.random.default_rng(seed).uniform(-0.3, 0.3, 3 * 8000).astype(np.float32)
    buf = io.BytesIO()
    sf.write(buf, x, 8000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def _calls(log_dir: Path) -> list[str]:
    return [json.loads(line)["fp"] for f in sorted(log_dir.glob("calls-*.jsonl")) for line in f.read_text().splitlines()]


def _processes_with(marker: str) -> list[int]:
    """Pids of processes whose command line or environment mentions ``marker`` (this test's Ray session)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            blob = (d / "cmdline").read_bytes() + (d / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in blob:
            pids.append(int(d.name))
    return pids


def _kill_leftovers(marker: str, timeout: float = 20.0) -> None:
    """SIGKILL what remains of a killed driver's local Ray (found by this test's unique RAY_TMPDIR)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = _processes_with(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"processes of the killed run still alive: {_processes_with(marker)}")


@pytest.fixture
def kill_setup(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="ecrs", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "call_logger_model.py").write_text(MODEL)
    (plugin / "sitecustomize.py").write_text("import call_logger_model  # noqa: F401  (test-only model)\n")
    audio_dir, calls = tmp_path / "audio", tmp_path / "calls"
    audio_dir.mkdir(), calls.mkdir()
    items = []
    for i in range(N_ITEMS):
        (audio_dir / f"c{i:02d}.wav").write_bytes(_clip(i))
        items.append({"item_id": f"i{i:02d}", "protocol": "factual", "question": f"Which instruments, take {i}?",
                      "labels": ["guitar"], "audio_uri": str(audio_dir / f"c{i:02d}.wav")})
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(r) for r in items))
    cfg = {"name": "killme",
           "datasets": [{"name": "d", "kind": "items_file", "params": {"path": str(tmp_path / "items.jsonl")}}],
           "models": [{"name": "slow", "kind": "test_call_logger", "params": {"log_dir": str(calls)},
                       "resources": {"num_cpus": 0.5, "batch_size": 4}}],
           "protocols": [{"name": "factual", "conditions": CONDITIONS}],
           "storage": {"root": str(tmp_path / "run")},
           "stats": {"bootstrap_resamples": 100},
           "ray": {"progress_bars": False, "decode_num_cpus": 0.5}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PYTHONPATH=os.pathsep.join([str(plugin), str(REPO)]), RAY_TMPDIR=ray_tmp,
               RAY_DATA_DISABLE_PROGRESS_BARS="1", RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION="0.05",
               RAY_USAGE_STATS_ENABLED="0")
    try:
        yield tmp_path, env, ray_tmp
    finally:
        _kill_leftovers(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _evalcore(*args: str, env: dict, cwd: Path, name: str) -> subprocess.Popen:
    """``evalcore run ARGS`` in its own session, output to ``cwd/<name>.out|.err``."""
    with open(cwd / f"{name}.out", "wb") as out, open(cwd / f"{name}.err", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "evalcore.cli", "run", *args, "--quiet"], env=env, cwd=cwd,
                                stdout=out, stderr=err, start_new_session=True)


@pytest.mark.ray
def test_kill_9_then_resume_loses_nothing_and_repeats_no_committed_call(kill_setup):
    tmp, env, ray_tmp = kill_setup
    root = tmp / "run"
    t0 = time.monotonic()
    proc = _evalcore(str(tmp / "config.yaml"), "--commit-every", "0", env=env, cwd=tmp, name="first")
    deadline = time.monotonic() + 150
    while not commit.shard_markers(str(root)):  # kill as soon as the first shard is committed
        assert proc.poll() is None, f"run ended before any commit: {(tmp / 'first.err').read_text()[-3000:]}"
        assert time.monotonic() < deadline, "no shard committed in 150 s"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)  # kill -9 of the driver
    proc.wait(timeout=10)
    t_kill = time.monotonic() - t0
    _kill_leftovers(ray_tmp)  # its Ray workers may still be finishing a batch: stop them before reading the log
    assert not (root / "run.json").exists()

    before = commit.load_committed(str(root))
    committed_fps = {r["text"].split()[-1] for r in before.rows if r["text"]}
    calls1 = _calls(tmp / "calls")
    assert 0 < len(before.rows) < N_ROWS and len(committed_fps) == len(before.rows)
    assert committed_fps <= set(calls1)
    (tmp / "calls1").mkdir()
    for f in (tmp / "calls").glob("calls-*.jsonl"):
        f.rename(tmp / "calls1" / f.name)

    t1 = time.monotonic()
    proc = _evalcore("--resume", str(root), env=env, cwd=tmp, name="resume")
    proc.wait(timeout=240)
    t_resume = time.monotonic() - t1
    err = (tmp / "resume.err").read_text(errors="replace")
    assert proc.returncode == 0, err[-4000:]

    after = commit.load_committed(str(root))
    keys = [(r["request_id"], r["chunk_index"]) for r in after.rows]
    files = pq.read_table(root / "responses").to_pandas()  # the directory as any reader sees it
    calls2 = _calls(tmp / "calls")
    final_fps = {r["text"].split()[-1] for r in after.rows}
    repeated_committed = committed_fps & set(calls2)
    repeated = set(calls1) & set(calls2)
    figures = {"rows_committed_before_kill": len(before.rows), "requests_committed_before_kill": len(before.request_ids),
               "model_calls_before_kill": len(calls1), "rows_after_resume": len(after.rows),
               "requests_after_resume": len(after.request_ids), "model_calls_in_resume": len(calls2),
               "calls_repeated_for_committed_rows": len(repeated_committed),
               "calls_repeated_for_uncommitted_rows": len(repeated), "killed_after_s": round(t_kill, 1),
               "resume_s": round(t_resume, 1)}
    print("\nkill-and-resume figures:", json.dumps(figures))
    assert len(keys) == len(set(keys)) == N_ROWS and after.request_ids >= before.request_ids  # none lost, no duplicate
    assert len(files) == N_ROWS and files.groupby(["request_id", "chunk_index"]).size().max() == 1
    assert len(after.request_ids) == N_REQUESTS
    assert not repeated_committed  # no model call repeated for committed work
    assert len(calls2) == len(set(calls2)) == N_ROWS - len(before.rows)  # the resume ran exactly the rest
    assert final_fps == committed_fps | set(calls2)
    c = json.loads((root / "run.json").read_text())["counts"]
    assert c["requests_in"] == N_REQUESTS == c["requests_scored"] + c["requests_errored"] and c["requests_errored"] == 0
    assert pq.read_table(root / "tables" / "per_item.parquet").num_rows == N_REQUESTS
    assert "committed earlier" in err and f"{len(before.request_ids)} committed earlier" in err
