"""The README's "Submitting to a Ray cluster" commands, run as written (the blocks after ``<!-- ray-head -->`` and
``<!-- ray-job -->``) from a copy of the clone: a head on 127.0.0.1, a job submitted to it with token
authentication, its outputs where the README says; the same job with a relative ``--out`` is refused. The test
gives the blocks' port variables free ports, a token file of its own (``RAY_AUTH_TOKEN_PATH``) and a Ray temp dir
of its own (``RAY_TMPDIR``), by which it stops only that head's processes afterwards (``ray stop`` would stop every
Ray of the user on the machine)."""

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

import pyarrow.parquet as pq
import pytest

from conftest import REPO
from ports import free_ports
from readme import readme_block
from resume_helpers import processes_with

pytestmark = [pytest.mark.slow, pytest.mark.ray]

#: what a user's clone holds besides git's files: the venv (linked below), earlier runs, caches
NOT_COPIED = shutil.ignore_patterns(".git", ".venv", ".venv-llama", "runs", "__pycache__", ".pytest_cache",
                                    "*.egg-info", "_work")


def _bash(block: str, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _stop(marker: str, grace: float = 30.0) -> None:
    """SIGTERM, then SIGKILL, every process started under this test's RAY_TMPDIR (only this head's)."""
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


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """The working tree copied as a user's clone is, with this interpreter's venv as its ``.venv``."""
    dest = tmp_path / "clone"
    shutil.copytree(REPO, dest, ignore=NOT_COPIED, symlinks=True)
    (dest / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return dest


def test_the_readme_job_submit_runs_as_written(clone: Path) -> None:
    ray_tmp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's unix sockets live under it
    token = Path(ray_tmp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    gcs, dash, client, agent = free_ports(4)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_MODE")}
    env.update(PATH=f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", RAY_TMPDIR=ray_tmp,
               RAY_AUTH_TOKEN_PATH=str(token), RAY_PORT=str(gcs), RAY_DASHBOARD_PORT=str(dash),
               RAY_CLIENT_PORT=str(client), RAY_AGENT_PORT=str(agent))
    marker = f"RAY_TMPDIR={ray_tmp}"
    try:
        head = _bash(readme_block("ray-head"), clone, env, timeout=180)
        assert head.returncode == 0, head.stdout[-3000:] + head.stderr[-3000:]
        for _ in range(20):  # the head's job agent may need a few seconds after `ray start` returns
            job = _bash(readme_block("ray-job"), clone, env, timeout=600)
            if "No available agent" not in job.stderr:
                break
            time.sleep(3)
        log = job.stdout + job.stderr
        assert job.returncode == 0 and "succeeded" in log, log[-4000:]
        # the same job with a relative --out would write into Ray's copy of the working dir: refused, naming --out
        bad = subprocess.run(["ray", "job", "submit", "--address", f"http://127.0.0.1:{dash}", "--working-dir", ".",
                              "--", str(clone / ".venv" / "bin" / "python"), "jobs/run_eval.py", "configs/small.yaml",
                              "--out", "runs/small"], cwd=clone, env={**env, "RAY_AUTH_MODE": "token"},
                             capture_output=True, text=True, timeout=300)
        refused = bad.stdout + bad.stderr
        assert bad.returncode != 0 and "--out: this Ray job runs in Ray's temporary copy" in refused, refused[-3000:]
    finally:
        _stop(marker)
        shutil.rmtree(ray_tmp, ignore_errors=True)

    root = clone / "runs" / "small"  # --out "$PWD/runs/small": the clone's runs/, not Ray's copy of it
    assert f"report: {root}/report.md" in log
    assert (root / "report.md").read_text().startswith("# evalcore report")
    summary = pq.read_table(root / "tables" / "summary.parquet").to_pandas()
    assert set(summary["model"]) == {"listener", "text-prior"}
    assert set(summary["protocol"]) == {"factual", "mcq"}
