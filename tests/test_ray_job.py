"""`ray job submit` of the job entrypoint against a Ray head started on 127.0.0.1 by the test."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pyarrow.parquet as pq
import pytest
import yaml

from conftest import REPO
from ports import free_ports
from evalcore.config import demo_config_path

pytestmark = pytest.mark.ray
RAY = os.path.join(os.path.dirname(sys.executable), "ray")


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


def _start_head(env: dict, temp: str, log_path: str) -> tuple[subprocess.Popen, int]:
    """``ray start --head --block`` on free loopback ports; returns the process and its dashboard port."""
    names = ("ray-client-server-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "runtime-env-agent-port", "metrics-export-port", "object-manager-port", "node-manager-port")
    # every port this cluster opens is a free one: another Ray (e.g. the tests' local one) may hold the defaults
    gcs, dash, *free = free_ports(2 + len(names))
    ports = [f"--{name}={port}" for name, port in zip(names, free)]
    with open(log_path, "w") as log:
        head = subprocess.Popen([RAY, "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
                                 "--port", str(gcs), "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash),
                                 *ports,
                                 "--num-cpus", "2", "--include-dashboard", "true", "--disable-usage-stats",
                                 "--temp-dir", temp],
                                stdout=log, stderr=subprocess.STDOUT, env=env)
    return head, dash


def _stop(head: subprocess.Popen) -> None:
    head.terminate()
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait(timeout=30)


@pytest.fixture
def ray_head(ray_env):
    """A Ray head in the foreground (``--block``), so stopping it stops only this cluster.

    A port picked free can be taken by another process before Ray binds it, so a head that exits
    while starting is started again on fresh ports (at most three attempts); a failure shows Ray's output.
    """
    env, temp = ray_env
    failures = []
    for attempt in range(3):
        log_path = os.path.join(temp, f"ray_start_{attempt}.log")
        head, dash = _start_head(env, temp, log_path)
        deadline = time.monotonic() + 120
        while not _serving(dash) and head.poll() is None:
            if time.monotonic() > deadline:
                _stop(head)
                pytest.fail("Ray dashboard did not come up in 120 s:\n" + _tail(log_path))
            time.sleep(0.5)
        if head.poll() is None:
            break
        failures.append(f"attempt {attempt + 1}: ray start exited with {head.returncode}:\n{_tail(log_path)}")
    else:
        pytest.fail("\n\n".join(failures))
    try:
        yield f"http://127.0.0.1:{dash}"
    finally:
        _stop(head)


def _tail(path: str, n: int = 3000) -> str:
    with open(path, errors="replace") as f:
        return f.read()[-n:]


def _serving(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/version", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # up, but wants a token
    except OSError:
        return False


def test_job_submit_runs_the_pipeline(ray_head, ray_env, tmp_path):
    data = yaml.safe_load(demo_config_path().read_text())
    data["datasets"][0]["params"].update(n_clips=12, bad_clips=1, audio_dir=str(tmp_path / "audio"))
    data["protocols"] = [p for p in data["protocols"] if p["name"] == "factual"]
    data["models"][0]["params"] = {"max_audio_seconds": 4.0}  # 8 s clips → two chunks for the listener
    data.setdefault("ray", {})["progress_bars"] = False
    cfg = tmp_path / "job.yaml"
    cfg.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    env, _ = ray_env
    for _ in range(20):  # the head's job agent may need a few seconds after its dashboard is up
        proc = subprocess.run(
            [RAY, "job", "submit", "--address", ray_head, "--working-dir", str(REPO), "--",
             sys.executable, "jobs/run_eval.py", str(cfg), "--out", str(out), "--quiet"],
            capture_output=True, text=True, env=env, timeout=600)
        if "No available agent" not in proc.stderr:
            break
        time.sleep(3)
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
