"""Helpers of the kill -9 and resume tests (local run root in ``test_resume.py``, S3 in ``test_resume_s3.py``).

A real ``evalcore run`` runs in a subprocess with a slow test-only model (registered from a
``sitecustomize`` module put on PYTHONPATH, so the driver and every Ray worker see it) that logs a
fingerprint of every input it is called on and answers with that fingerprint. The driver is killed with
SIGKILL as soon as a shard is committed, what remains of its Ray is killed too, and ``evalcore run --resume``
finishes the run; :func:`check_resumed` asserts nothing was lost, duplicated or called again.

Run roots are local paths or ``s3://`` URIs: everything here reads them through :mod:`evalcore.core.storage`.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from evalcore.core import storage
from evalcore.pipeline import commit

REPO = Path(__file__).resolve().parents[1]

#: env var overriding the test model's seconds per input (same config for both attempts; the first attempt
#: is slow enough to be killed mid-run, the resume need not be)
DELAY_ENV = "EVALCORE_TEST_CALL_DELAY_S"

MODEL = '''
"""A slow test-only Music LM that logs a fingerprint of every input it generates for."""
import hashlib, json, os, time

from evalcore.models.base import MODELS


def fingerprint(p) -> str:
    audio = b"none" if p.audio is None else p.audio.tobytes()
    return hashlib.sha1(p.prompt.encode() + b"|" + audio).hexdigest()[:16]


@MODELS.register("test_call_logger")
class CallLogger:
    sample_rate = 8000
    max_audio_seconds = 1.5

    def __init__(self, log_dir, delay_s=0.03, sample_rate=8000, max_audio_seconds=1.5):
        self.log_dir = log_dir
        self.delay_s = float(os.environ.get("%s", delay_s))
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
''' % DELAY_ENV

CONDITIONS = ["correct", "random", "noise", "text_only"]
CLIP_S, SR, WINDOW_S = 3.0, 8000, 1.5


def n_requests(n_items: int) -> int:
    return n_items * len(CONDITIONS)


def n_rows(n_items: int) -> int:
    """3 s clips in 1.5 s windows: 2 chunks for each audio condition, 1 for text_only."""
    return n_items * (3 * 2 + 1)


def clip(seed: int) -> bytes:
    x = np.random.default_rng(seed).uniform(-0.3, 0.3, int(CLIP_S * SR)).astype(np.float32)
    buf = io.BytesIO()
    sf.write(buf, x, SR, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def items(audio_uris: list[str]) -> list[dict]:
    return [{"item_id": f"i{i:02d}", "protocol": "factual", "question": f"Which instruments, take {i}?",
             "labels": ["guitar"], "audio_uri": uri} for i, uri in enumerate(audio_uris)]


def jsonl(rows: list[dict]) -> str:
    return "\n".join(json.dumps(r) for r in rows)


def run_config(name: str, items_uri: str, root: str, calls_dir: Path, storage_extra: dict | None = None) -> dict:
    """The run: the slow model on every condition of the items at ``items_uri``, written to ``root``."""
    return {"name": name,
            "datasets": [{"name": "d", "kind": "items_file", "params": {"path": items_uri}}],
            "models": [{"name": "slow", "kind": "test_call_logger", "params": {"log_dir": str(calls_dir)},
                        "resources": {"num_cpus": 0.5, "batch_size": 4}}],
            "protocols": [{"name": "factual", "conditions": CONDITIONS}],
            "storage": {"root": root, **(storage_extra or {})},
            "stats": {"bootstrap_resamples": 100},
            "ray": {"progress_bars": False, "decode_num_cpus": 0.5}}


def plugin_env(plugin_dir: Path, ray_tmp: str) -> dict:
    """Write the test model's plugin into ``plugin_dir``; the subprocess environment that loads it.

    The environment is this process's (so AWS keys a fixture put there reach the driver and its Ray
    workers), without RAY_ADDRESS, with a Ray temp dir of the test's own (found again by :func:`kill_leftovers`)."""
    plugin_dir.mkdir(parents=True, exist_ok=True)
    (plugin_dir / "call_logger_model.py").write_text(MODEL)
    (plugin_dir / "sitecustomize.py").write_text("import call_logger_model  # noqa: F401  (test-only model)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", DELAY_ENV)}
    env.update(PYTHONPATH=os.pathsep.join([str(plugin_dir), str(REPO)]), RAY_TMPDIR=ray_tmp,
               RAY_DATA_DISABLE_PROGRESS_BARS="1", RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION="0.05",
               RAY_USAGE_STATS_ENABLED="0")
    return env


def calls(log_dir: Path) -> list[str]:
    """Fingerprints of every model call logged in ``log_dir``."""
    return [json.loads(line)["fp"] for f in sorted(log_dir.glob("calls-*.jsonl")) for line in f.read_text().splitlines()]


def processes_with(marker: str) -> list[int]:
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


def kill_leftovers(marker: str, timeout: float = 20.0) -> None:
    """SIGKILL what remains of a killed driver's local Ray (found by this test's unique RAY_TMPDIR)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = processes_with(marker)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"processes of the killed run still alive: {processes_with(marker)}")


def evalcore(*args: str, env: dict, cwd: Path, name: str) -> subprocess.Popen:
    """``evalcore run ARGS`` in its own session, output to ``cwd/<name>.out|.err`` (not ``--quiet``: the tests
    read the resume's INFO lines)."""
    with open(cwd / f"{name}.out", "wb") as out, open(cwd / f"{name}.err", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "evalcore.cli", "run", *args], env=env, cwd=cwd,
                                stdout=out, stderr=err, start_new_session=True)


def kill_at_first_commit(proc: subprocess.Popen, root: str, err: Path, timeout: float = 150.0,
                         poll_s: float = 0.05) -> None:
    """Poll ``root``'s ``_commits/`` (bounded by ``timeout``) and SIGKILL the driver once a shard is committed."""
    deadline = time.monotonic() + timeout
    while not commit.shard_markers(root):
        assert proc.poll() is None, f"run ended before any commit: {err.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"no shard committed in {timeout:.0f} s"
        time.sleep(poll_s)
    os.kill(proc.pid, signal.SIGKILL)  # kill -9 of the driver
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


@dataclass
class Killed:
    """What the killed attempt left: committed rows, their fingerprints, the model calls it made."""

    before: commit.Committed
    committed_fps: set[str]
    calls: list[str]


def after_kill(root: str, calls_dir: Path, n_items: int) -> Killed:
    """Read the killed attempt's commits and call log (its Ray must be dead); move the log aside."""
    assert not storage.exists(storage.join(root, "run.json"))
    before = commit.load_committed(root)
    committed_fps = {r["text"].split()[-1] for r in before.rows if r["text"]}
    made = calls(calls_dir)
    assert 0 < len(before.rows) < n_rows(n_items), "the kill did not land mid-run"
    assert len(committed_fps) == len(before.rows) and committed_fps <= set(made)
    aside = calls_dir.parent / f"{calls_dir.name}-killed"
    aside.mkdir()
    for f in calls_dir.glob("calls-*.jsonl"):
        f.rename(aside / f.name)
    return Killed(before, committed_fps, made)


def check_resumed(root: str, killed: Killed, calls_dir: Path, err: str, n_items: int) -> dict:
    """Assert the resumed run lost nothing, duplicated nothing and repeated no call for committed work;
    returns the figures."""
    n_req, n_row = n_requests(n_items), n_rows(n_items)
    before = killed.before
    after = commit.load_committed(root)
    keys = [(r["request_id"], r["chunk_index"]) for r in after.rows]
    files = storage.read_parquet(storage.join(root, "responses")).to_pandas()  # the prefix as any reader sees it
    resumed_calls = calls(calls_dir)
    final_fps = {r["text"].split()[-1] for r in after.rows}
    repeated_committed = killed.committed_fps & set(resumed_calls)
    figures = {"rows_committed_before_kill": len(before.rows),
               "requests_committed_before_kill": len(before.request_ids),
               "model_calls_before_kill": len(killed.calls), "rows_after_resume": len(after.rows),
               "requests_after_resume": len(after.request_ids), "model_calls_in_resume": len(resumed_calls),
               "calls_repeated_for_committed_rows": len(repeated_committed),
               "calls_repeated_for_uncommitted_rows": len(set(killed.calls) & set(resumed_calls))}
    why = f"figures: {json.dumps(figures)}"
    # zero lost rows, zero duplicate (request_id, chunk_index) pairs, committed rows kept as they were
    assert len(keys) == len(set(keys)) == n_row, f"lost or duplicate rows: {len(keys)} rows, " \
        f"{len(set(keys))} distinct, {n_row} expected; {why}"
    assert after.request_ids >= before.request_ids, why
    assert {(r["request_id"], r["chunk_index"], r["text"]) for r in before.rows} <= \
        {(r["request_id"], r["chunk_index"], r["text"]) for r in after.rows}, f"committed rows changed; {why}"
    dup = files.groupby(["request_id", "chunk_index"]).size().max()
    assert len(files) == n_row and dup == 1, f"responses/ reads {len(files)} rows, a pair up to {dup}×; {why}"
    assert len(after.request_ids) == n_req, why
    # no model call repeated for committed work; the resume ran exactly the rest, once each
    assert not repeated_committed, f"model called again for committed rows; {why}"
    assert len(resumed_calls) == len(set(resumed_calls)) == n_row - len(before.rows), \
        f"the resume did not call the model once for each uncommitted row; {why}"
    assert final_fps == killed.committed_fps | set(resumed_calls), why
    # counts reconcile
    c = json.loads(storage.read_text(storage.join(root, "run.json")))["counts"]
    assert c["requests_in"] == n_req == c["requests_scored"] + c["requests_errored"] and c["requests_errored"] == 0, c
    assert storage.read_parquet(storage.join(root, "tables", "per_item.parquet")).num_rows == n_req
    assert f"{len(before.request_ids)} committed earlier, {n_req - len(before.request_ids)} to run" in err, err[-3000:]
    return figures
