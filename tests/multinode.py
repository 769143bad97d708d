"""A Ray cluster of several nodes on one machine whose nodes share no disk, for the multi-node tests and benchmark.

* The **head** (``ray start --head --num-cpus 0``: it schedules, as a KubeRay head does, and runs the drivers) in this
  machine's mount namespace, with token authentication and a token made here.
* Each **worker node** in a mount namespace of its own (``unshare --mount --propagation private``, root only) over a
  tmpfs ``/tmp`` of its own: it cannot see the head's ``/tmp``, where the tests' run roots and files lie, as a pod
  cannot see another's disk. What the workers need of the shared disk (this checkout and its venv) is bound back at
  the same path when it lies under ``/tmp``.

Every port is a free one on 127.0.0.1 (each node gets its own worker-port range); Ray's health check runs every
second so that a killed node is found dead in seconds. :meth:`Cluster.kill_raylet` kills a worker node's raylet by
its PID (its workers die with it, as with a lost pod); :meth:`Cluster.start_worker` starts a node again (KubeRay
replaces a lost pod). :meth:`Cluster.stop` stops only the processes this cluster started (each node runs in a session
of its own, ended by its process group), never another Ray of the machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from ports import free_ports

REPO = Path(__file__).resolve().parents[1]
RAY = os.path.join(os.path.dirname(sys.executable), "ray")
#: Ray's health check, fast: a node whose raylet died is marked dead after about 3 s (defaults: 3 s × 5)
FAST_HEALTH = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
               "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3"}
OBJECT_STORE = 256 << 20


def can_run() -> str | None:
    """Why a cluster of private-/tmp nodes cannot be built here, or None."""
    if os.geteuid() != 0:
        return "needs root, for a mount namespace per worker node (unshare --mount)"
    if shutil.which("unshare") is None:
        return "needs util-linux's unshare"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs tmpfs /tmp && test ! -e /tmp/.evalcore-probe"], capture_output=True,
                           text=True, timeout=30)
    if probe.returncode != 0:
        return f"cannot mount a private /tmp in a new mount namespace: {probe.stderr.strip()[:200]}"
    return None


def _port_range(n: int = 200, tries: int = 50) -> tuple[int, int]:
    """``n`` consecutive ports free on 127.0.0.1 now, for one node's workers: between Ray's default worker ports
    (10002–19999, another local Ray's) and the kernel's ephemeral ports (32768 on), where the free ports given to
    every other component come from."""
    for _ in range(tries):
        start = secrets.randbelow(12_000 - n) + 20_000
        socks = []
        try:
            for p in range(start, start + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return start, start + n - 1
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no range of free ports found")


def _under_tmp(path: str) -> bool:
    return os.path.realpath(path) == "/tmp" or os.path.realpath(path).startswith("/tmp/")


@dataclass
class Cluster:
    """A head and worker nodes (see the module docstring); ``env`` is a client's environment (drivers, the CLI)."""

    env: dict
    address: str  #: the GCS address, for RAY_ADDRESS
    dashboard: str  #: the dashboard's URL
    temp: str  #: the head's Ray temp dir (the workers' lives in their own /tmp, at the same path)
    head: subprocess.Popen
    worker_cpus: float = 2.0
    worker_resources: dict = field(default_factory=dict)
    workers: dict[int, subprocess.Popen] = field(default_factory=dict)
    logs: Path = Path("/var/tmp")

    # ------------------------------------------------------------------ nodes
    def start_worker(self, i: int) -> subprocess.Popen:
        """Start worker node ``i`` (again) in a mount namespace of its own over a private tmpfs /tmp."""
        low, high = _port_range()
        ports = free_ports(6)
        binds = []
        for keep in sorted({os.path.realpath(REPO), os.path.realpath(sys.prefix)}):
            if _under_tmp(keep):  # bound back at its own path inside the private /tmp, from the old /tmp (fd 3)
                inside = shlex.quote(os.path.relpath(keep, "/tmp"))
                binds.append(f"mkdir -p {shlex.quote(keep)} && mount --no-canonicalize --bind "
                             f"/proc/self/fd/3/{inside} {shlex.quote(keep)}")
        start = [RAY, "start", "--block", "--address", self.address, "--node-ip-address", "127.0.0.1",
                 "--num-cpus", str(int(self.worker_cpus)), "--object-store-memory", str(OBJECT_STORE),
                 "--dashboard-agent-listen-port", str(ports[0]), "--dashboard-agent-grpc-port", str(ports[1]),
                 "--runtime-env-agent-port", str(ports[2]), "--metrics-export-port", str(ports[3]),
                 "--object-manager-port", str(ports[4]), "--node-manager-port", str(ports[5]),
                 "--min-worker-port", str(low), "--max-worker-port", str(high), "--disable-usage-stats"]
        if self.worker_resources:
            start += ["--resources", json.dumps(self.worker_resources)]
        # the old /tmp stays reachable through a descriptor opened before the tmpfs covers it (fd 3; mount must not
        # canonicalize the path, which would name the new /tmp)
        script = " && ".join(["cd /", "exec 3</tmp", "mount -t tmpfs -o size=1g,mode=1777 tmpfs /tmp", *binds,
                              "exec 3<&-", "exec " + " ".join(shlex.quote(a) for a in start)])
        log = open(self.logs / f"worker{i}-{int(time.time() * 1000)}.log", "w")
        proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "bash", "-c", script], stdout=log,
                                stderr=subprocess.STDOUT, env=self._node_env(), start_new_session=True)
        log.close()
        self.workers[i] = proc
        return proc

    def _node_env(self) -> dict:
        return {**self.env, **FAST_HEALTH}

    def raylet_pid(self, i: int) -> int | None:
        """The PID of worker node ``i``'s raylet (a child of its ``ray start --block``), or None."""
        proc = self.workers.get(i)
        if proc is None or proc.poll() is not None:
            return None
        for pid in _children(proc.pid):
            if _comm(pid) == "raylet":
                return pid
        return None

    def kill_raylet(self, i: int) -> int:
        """SIGKILL worker node ``i``'s raylet (its workers die with it); returns the PID killed."""
        pid = self.raylet_pid(i)
        assert pid is not None, f"worker node {i} has no raylet"
        os.kill(pid, signal.SIGKILL)
        return pid

    def alive(self) -> int:
        """How many nodes the cluster counts alive (the state API, with the token)."""
        req = urllib.request.Request(f"{self.dashboard}/api/v0/nodes?limit=100",
                                     headers={"Authorization": f"Bearer {self.env['RAY_AUTH_TOKEN']}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            nodes = json.loads(r.read())["data"]["result"]["result"]
        return sum(n["state"] == "ALIVE" for n in nodes)

    def wait_alive(self, n: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            try:
                seen = self.alive()
            except OSError:
                seen = None
            if seen == n:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{n} live node(s) expected, {seen} after {timeout:.0f} s; logs in {self.logs}")

    def wait_raylet(self, i: int, timeout: float = 120.0, starts: int = 3) -> None:
        """Wait until worker node ``i`` has a raylet and the cluster counts it alive (every worker started is).

        A ``ray start`` that gave up (on a loaded machine its first call to the GCS can miss its deadline:
        "The current node timed out during startup") is started again, ``starts`` times in all, each with
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.raylet_pid(i) is None or self.alive() < 1 + sum(p.poll() is None for p in self.workers.values()):
            if self.workers[i].poll() is not None and starts > 1:
                starts -= 1
                self.start_worker(i)
                deadline = time.monotonic() + timeout
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker node {i} did not come up in {timeout:.0f} s; logs in {self.logs}")
            time.sleep(0.5)

    def replace_worker(self, i: int, expect: int) -> None:
        """Stop what is left of worker node ``i`` and start it again; wait for ``expect`` live nodes."""
        stop_group(self.workers.pop(i, None))
        self.start_worker(i)
        self.wait_alive(expect)

    def stop(self) -> None:
        for proc in self.workers.values():
            stop_group(proc)
        stop_group(self.head)
        shutil.rmtree(self.temp, ignore_errors=True)


def start(n_workers: int = 2, worker_cpus: float = 2.0, worker_resources: dict | None = None,
          extra_env: dict | None = None) -> Cluster:
    """A head (``--num-cpus 0``) and ``n_workers`` worker nodes, each with a private /tmp; returns once every node is
    alive. ``extra_env``: the nodes' and clients' environment besides Ray's (e.g. the run's S3 keys)."""
    reason = can_run()
    if reason is not None:
        raise RuntimeError(reason)
    temp = tempfile.mkdtemp(prefix="rm", dir="/tmp")  # short: Ray's unix sockets live under it
    token = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
    env.update(extra_env or {})
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token,
               PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}")
    gcs, dash, client, *hp = free_ports(9)
    low, high = _port_range()
    logs = Path(tempfile.mkdtemp(prefix="evalcore-mn-logs-", dir="/var/tmp"))
    log = open(logs / "head.log", "w")
    head = subprocess.Popen(
        [RAY, "start", "--head", "--block", "--node-ip-address", "127.0.0.1", "--port", str(gcs),
         "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash), "--ray-client-server-port", str(client),
         "--dashboard-agent-listen-port", str(hp[0]), "--dashboard-agent-grpc-port", str(hp[1]),
         "--runtime-env-agent-port", str(hp[2]), "--metrics-export-port", str(hp[3]),
         "--object-manager-port", str(hp[4]), "--node-manager-port", str(hp[5]),
         "--min-worker-port", str(low), "--max-worker-port", str(high), "--num-cpus", "0",
         "--object-store-memory", str(OBJECT_STORE), "--include-dashboard", "true", "--disable-usage-stats",
         "--temp-dir", temp],
        stdout=log, stderr=subprocess.STDOUT, env={**env, **FAST_HEALTH}, start_new_session=True)
    log.close()
    cluster = Cluster(env={**env, "RAY_ADDRESS": f"127.0.0.1:{gcs}"}, address=f"127.0.0.1:{gcs}",
                      dashboard=f"http://127.0.0.1:{dash}", temp=temp, head=head, worker_cpus=worker_cpus,
                      worker_resources=dict(worker_resources or {}), logs=logs)
    try:
        cluster.wait_alive(1, timeout=120)
        for i in range(n_workers):
            cluster.start_worker(i)
        for i in range(n_workers):
            cluster.wait_raylet(i)  # a node whose start gave up is started again
        cluster.wait_alive(1 + n_workers, timeout=120)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _children(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    text = f.read().decode("ascii", "replace")
            except OSError:
                continue
            if int(text[text.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(name))
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def stop_group(proc: subprocess.Popen | None, grace: float = 1.0) -> None:
    """End a node: SIGTERM to its process group (``ray start --block`` would drain it for 30 s), then SIGKILL to the
    group, which holds the node's processes (its session: none of them starts one of its own)."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:  # what is left of the group once its leader is gone (a raylet's workers)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
