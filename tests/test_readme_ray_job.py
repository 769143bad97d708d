"""`ray job submit` against a Ray head on 127.0.0.1, started by the README's "Submitting to a Ray cluster" block as
written (``<!-- ray-head -->``) in a copy of the clone, with token authentication; one head for the module's jobs:

* the README's job (``<!-- ray-job -->``) as written, its outputs where the README says; the same job with a
  relative ``--out`` is refused;
* ``jobs/run_eval.py`` on a cut demo whose 8 s clips reach the listener in two 4 s chunks: the chunks merged back.

The module gives the blocks' port variables free ports, a token file of its own (``RAY_AUTH_TOKEN_PATH``) and a Ray
temp dir of its own (``RAY_TMPDIR``), by which it stops only that head's processes afterwards (``ray stop`` would
stop every Ray of the user on the machine)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import REPO
from evalcore.runconfig.config import demo_config_path
from ports import free_ports
from readme import readme_block
from ray_heads import RAY
from resume_helpers import processes_with

pytestmark = [pytest.mark.slow, pytest.mark.ray]

#: what a user's clone holds besides git's files: the venv (linked below), earlier runs, caches
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", ".venv-llama", "runs", "__pycache__", ".pytest_cache",
                                    "*.egg-info", "_work")


def _bash(block: str, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _stop(marker: str, grace: float = 3.0) -> None:
    """SIGTERM, then SIGKILL, every process started under this test's RAY_TMPDIR (only this head's); the grace is
    short: a raylet drains for 30 s on SIGTERM, and nothing of this head is needed after its tests."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in processes_with(marker):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.3)
    assert not processes_with(marker), "the test's Ray head outlived its stop"


class Head(NamedTuple):
    clone: Path  # the copy of the clone the head was started in
    env: dict  # the environment of the README's blocks (ports, token file, RAY_TMPDIR)
    address: str  # the dashboard's URL, for `ray job submit --address`


@pytest.fixture(scope="module")
def head(tmp_path_factory) -> Head:
    """The working tree copied as a user's clone is (with this interpreter's venv as its ``.venv``), and the README's
    head started in it; stopped (by its RAY_TMPDIR) after the module's tests."""
    clone = tmp_path_factory.mktemp("readme") / "clone"
    shutil.copytree(REPO, clone, ignore=NOT_COPIED, symlinks=True)
    (clone / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    ray_tmp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's unix sockets live under it
    token = Path(ray_tmp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    gcs, dash, client, agent = free_ports(4)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_MODE")}
    env.update(PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", RAY_TMPDIR=ray_tmp,
               RAY_AUTH_TOKEN_PATH=str(token), RAY_PORT=str(gcs), RAY_DASHBOARD_PORT=str(dash),
               RAY_CLIENT_PORT=str(client), RAY_AGENT_PORT=str(agent))
    try:
        started = _bash(readme_block("ray-head"), clone, env, timeout=180)
        assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
        yield Head(clone, env, f"http://127.0.0.1:{dash}")
    finally:
        _stop(f"RAY_TMPDIR={ray_tmp}")
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _until_an_agent_takes_it(submit) -> subprocess.CompletedProcess:
    """``submit()`` again while the head's job agent is not up yet (a few seconds after `ray start` returns)."""
    for _ in range(20):
        job = submit()
        if "No available agent" not in job.stderr:
            break
        time.sleep(3)
    return job


def test_the_readme_job_submit_runs_as_written(head: Head) -> None:
    clone, env = head.clone, head.env
    job = _until_an_agent_takes_it(lambda: _bash(readme_block("ray-job"), clone, env, timeout=600))
    log = job.stdout + job.stderr
    assert job.returncode == 0 and "succeeded" in log, log[-4000:]
    # the same job with a relative --out would write into Ray's copy of the working dir: refused, naming --out
    bad = subprocess.run(["ray", "job", "submit", "--address", head.address, "--working-dir", ".",
                          "--", str(clone / ".venv" / "bin" / "python"), "jobs/run_eval.py", "configs/small.yaml",
                          "--out", "runs/small"], cwd=clone, env={**env, "RAY_AUTH_MODE": "token"},
                         capture_output=True, text=True, timeout=300)
    refused = bad.stdout + bad.stderr
    assert bad.returncode != 0 and "--out: this Ray job runs in Ray's temporary copy" in refused, refused[-3000:]

    root = clone / "runs" / "small"  # --out "$PWD/runs/small": the clone's runs/, not Ray's copy of it
    assert f"report: {root}/report.md" in log
    assert (root / "report.md").read_text().startswith("# evalcore report")
    summary = pq.read_table(root / "tables" / "summary.parquet").to_pandas()
    assert set(summary["model"]) == {"listener", "text-prior"}
    assert set(summary["protocol"]) == {"factual", "mcq"}


def test_job_submit_runs_the_pipeline(head: Head, tmp_path: Path) -> None:
    """``jobs/run_eval.py`` as a job (this interpreter, the clone as working dir): a cut demo whose 8 s clips the
    listener hears in two 4 s chunks, merged back into one row per request."""
    data = yaml.safe_load(demo_config_path().read_text())
    data["datasets"][0]["params"].update(n_clips=12, bad_clips=1, audio_dir=str(tmp_path / "audio"))
    data["protocols"] = [p for p in data["protocols"] if p["name"] == "factual"]
    data["models"][0]["params"] = {"max_audio_seconds": 4.0}  # 8 s clips → two chunks for the listener
    data.setdefault("ray", {})["progress_bars"] = False
    cfg = tmp_path / "job.yaml"
    cfg.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    proc = _until_an_agent_takes_it(lambda: subprocess.run(
        [RAY, "job", "submit", "--address", head.address, "--working-dir", str(head.clone), "--",
         sys.executable, "jobs/run_eval.py", str(cfg), "--out", str(out), "--quiet"],
        capture_output=True, text=True, env={**head.env, "RAY_AUTH_MODE": "token"}, timeout=600))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "succeeded" in (proc.stdout + proc.stderr)
    summary = pq.read_table(out / "tables" / "summary.parquet").to_pandas()
    assert set(summary["model"]) == {"listener", "text-prior"}
    assert (out / "report.md").read_text().startswith("# evalcore report")
    responses = pq.read_table(out / "responses").to_pandas()
    heard = responses[(responses.model == "listener") & responses.error.isna() & (responses.condition != "text_only")]
    assert set(heard["n_chunks"]) == {2} and set(heard["chunk_index"]) == {0, 1}
    assert heard["audio_seconds"].max() == pytest.approx(4.0)
    per_item = pq.read_table(out / "tables" / "per_item.parquet").to_pandas()
    assert per_item["request_id"].is_unique  # chunks merged back into one row per request
