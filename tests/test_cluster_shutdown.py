"""A driver killed with ``kill -9`` leaves no process of the local Ray cluster it started (the watchdog of
:mod:`evalcore.core.cluster`), and a stale ``ray_current_cluster`` record does not stop the next start.

Only the processes of the cluster this test's own driver starts are looked at (its descendants, by PID and
start time): other Ray clusters on the machine are never touched. Whatever survives is killed at the end.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evalcore.core import cluster

pytestmark = [pytest.mark.ray, pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc (Linux)")]

REPO = Path(__file__).resolve().parents[1]

DRIVER = """
import sys, time, ray
from evalcore.runconfig.config import parse_config
from evalcore.pipeline.graph import init_ray
cfg = parse_config({"name": "t", "datasets": [{"name": "d", "kind": "synthetic"}], "models": [{"name": "m", "kind": "null"}],
                    "protocols": [{"name": "factual"}], "ray": {"progress_bars": False}})
init_ray(cfg.ray)
print("ready", ray.get(ray.remote(lambda: "with a worker").remote()), flush=True)  # one line: one read
time.sleep(600)
"""


def _descendants(pid: int) -> dict[int, int]:
    """Live descendants of ``pid``: PID → start time."""
    tracked: dict[int, int] = {pid: cluster._stat(pid)[1]}
    cluster._record(tracked, [])
    del tracked[pid]
    return tracked


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return "?"


def test_kill_9_of_the_driver_leaves_no_ray_process_and_a_stale_record_is_ignored():
    tmp = tempfile.mkdtemp(prefix="ec-", dir="/tmp")  # short: Ray's socket paths live under it
    os.makedirs(os.path.join(tmp, "ray"))
    # what a killed `ray start` head leaves behind: a plain ray.init() would wait for it for minutes
    Path(tmp, "ray", "ray_current_cluster").write_text("127.0.0.1:1")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=tmp, PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0")
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    procs: dict[int, int] = {}
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 240
        while not any(x.startswith("ready") for x in lines) and (left := deadline - time.monotonic()) > 0:
            if select.select([driver.stdout], [], [], left)[0]:
                if not (line := driver.stdout.readline()):
                    break
                lines.append(line.strip())
        assert any(x.startswith("ready") for x in lines), f"the driver did not start its cluster: {lines}"
        time.sleep(2 * cluster.POLL_S)  # the watchdog has recorded the cluster
        procs = _descendants(driver.pid)
        names = {_name(p) for p in procs}
        assert any(n.endswith("raylet") for n in names) and "ray::DashboardAgent" in names, names
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(cluster._alive(p, t) for p, t in procs.items()):
            time.sleep(0.5)
        left = {p: _name(p) for p, t in procs.items() if cluster._alive(p, t)}
        assert not left, f"left running after kill -9 of the driver: {left}"
        print(f"\ncluster of {len(procs)} processes (watchdog included) gone after kill -9 of the driver")
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid, started in procs.items():  # only this test's cluster
            if cluster._alive(pid, started):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
