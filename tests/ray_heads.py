"""A Ray head on 127.0.0.1 for the tests that submit jobs (``ray job submit``), with token authentication and a
token made for the test, in the foreground (``ray start --head --block``) so that stopping it stops only this
cluster. The fixtures ``ray_env`` (the head's and the clients' environment) and ``ray_head`` (its dashboard URL)
are imported by the test modules that use them."""

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

import pytest

from multinode import stop_group
from ports import free_ports

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
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return head, dash


def _stop(head: subprocess.Popen) -> None:
    """The head's process group ended: SIGTERM with a short grace (``ray start --block`` would drain it for 30 s),
    then SIGKILL to the group, which holds this cluster's processes (its own session) and nothing else."""
    stop_group(head, grace=2.0)


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
