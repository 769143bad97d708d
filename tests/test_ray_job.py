"""`ray job submit` of the job entrypoint against a Ray head started on 127.0.0.1 by the test."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

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
def ray_head(tmp_path):
    gcs, dash = _free_port(), _free_port()
    env = {**os.environ, "RAY_ADDRESS": ""}
    subprocess.run([RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
                    "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash), "--num-cpus", "2",
                    "--include-dashboard", "true", "--disable-usage-stats",
                    "--temp-dir", str(tmp_path / "ray")], check=True, capture_output=True, env=env, timeout=180)
    try:
        yield f"http://127.0.0.1:{dash}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)


def test_job_submit_runs_the_pipeline(ray_head, tmp_path):
    data = yaml.safe_load(demo_config_path().read_text())
    data["datasets"][0]["params"].update(n_clips=12, bad_clips=1, audio_dir=str(tmp_path / "audio"))
    data["protocols"] = [p for p in data["protocols"] if p["name"] == "factual"]
    data["ray"] = {"progress_bars": False}
    cfg = tmp_path / "job.yaml"
    cfg.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [RAY, "job", "submit", "--address", ray_head, "--working-dir", str(REPO), "--",
         sys.executable, "jobs/run_eval.py", str(cfg), "--out", str(out), "--quiet"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "succeeded" in (proc.stdout + proc.stderr)
    summary = pq.read_table(out / "tables" / "summary.parquet").to_pandas()
    assert set(summary["model"]) == {"listener", "text-prior"}
    assert (out / "report.md").read_text().startswith("# evalcore report")
