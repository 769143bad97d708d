"""`ray job submit` of the job entrypoint against a Ray head started on 127.0.0.1 by the test."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import REPO
from evalcore.config import demo_config_path

pytestmark = pytest.mark.ray
RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_env():
    """Environment of the head and the client: token authentication with a token made for this test."""
    temp = tempfile.mkdtemp(prefix="rj", dir="/tmp")  # short: Ray's unix sockets live under it
    token = os.path.join(temp, "auth_token")
    with open(token, "w") as f:
        f.write(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token)
    yield env, temp
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def ray_head(ray_env):
    env, temp = ray_env
    gcs, dash = _free_port(), _free_port()
    proc = subprocess.run([RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
                           "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash), "--num-cpus", "2",
                           "--include-dashboard", "true", "--disable-usage-stats", "--temp-dir", temp],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    try:
        yield f"http://127.0.0.1:{dash}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120, env=env)


def test_job_submit_runs_the_pipeline(ray_head, ray_env, tmp_path):
    data = yaml.safe_load(demo_config_path().read_text())
    data["datasets"][0]["params"].update(n_clips=12, bad_clips=1, audio_dir=str(tmp_path / "audio"))
    data["protocols"] = [p for p in data["protocols"] if p["name"] == "factual"]
    data["ray"] = {"progress_bars": False}
    cfg = tmp_path / "job.yaml"
    cfg.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    env, _ = ray_env
    proc = subprocess.run(
        [RAY, "job", "submit", "--address", ray_head, "--working-dir", str(REPO), "--",
         sys.executable, "jobs/run_eval.py", str(cfg), "--out", str(out), "--quiet"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "succeeded" in (proc.stdout + proc.stderr)
    summary = pq.read_table(out / "tables" / "summary.parquet").to_pandas()
    assert set(summary["model"]) == {"listener", "text-prior"}
    assert (out / "report.md").read_text().startswith("# evalcore report")
