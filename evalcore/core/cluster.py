"""The Ray cluster of a driver: the configured one, or a fresh local one that does not outlive its driver.

**Which cluster.** ``ray.address`` from the config, else ``$RAY_ADDRESS``, else a *new* local cluster
(``ray.init(address="local")``). Never one found on the machine: a plain ``ray.init()`` joins the last
``ray start`` recorded in ``<ray tmp>/ray_current_cluster`` — another user's cluster, or a dead one left
by a killed head, on which it waits for minutes. ``address: auto`` still asks for that lookup.

**A job's working directory.** A driver started by ``ray job submit --working-dir DIR`` runs in Ray's temporary
copy of DIR, deleted with the job: :func:`temporary_root` refuses a run root there (a relative ``--out``, or none).

**Clean shutdown.** Ray (2.60, Linux) starts the processes of a local cluster with
``PR_SET_PDEATHSIG``: its GCS, raylet, monitor, dashboard and log monitor die with the driver, even on
``kill -9``, and idle workers exit once the raylet is gone. The raylet's agents (``DashboardAgent``,
``RuntimeEnvAgent``) do not: they notice the raylet's death and call ``sys.exit``, which does not end
them; re-parented to PID 1, they keep running and ignore SIGTERM. Ray's own reaper (a process that kills
its process group when its stdin closes) is used only where the kernel cannot fate-share, and it makes the
driver a process-group leader, which would take it out of a terminal's job control.

So :func:`start` adds a **watchdog** when it starts a local cluster: ``python -m evalcore.core.cluster``, in a
session of its own, reading a pipe from the driver. Every second it records the cluster's processes (the
processes Ray's node started and all their descendants, each by PID *and* start time, so a reused PID is
never touched). When the pipe closes (the driver exited or was killed, whatever the signal) or the driver
is gone, it gives Ray a moment to stop, then sends SIGTERM and, after a grace period, SIGKILL to every
recorded process still alive, and exits. Processes of other clusters on the machine are never recorded.
What it cannot catch: a process started less than a second before the driver died, a watchdog that is
itself killed (``kill -9`` of the whole process group or session: then nothing outlives it to clean up),
and non-Linux systems (no ``/proc``; there Ray uses its own reaper).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

from evalcore.core import ray_internals

POLL_S = 1.0
SETTLE_S = 1.0  # after the driver's end: Ray's own shutdown (a normal exit) finishes first
GRACE_S = 3.0  # SIGTERM → SIGKILL

_watchdog: subprocess.Popen | None = None


def job_working_dir() -> str | None:
    """Ray's temporary copy of a job's working directory, when this process is the driver of a job submitted with
    one (``ray job submit --working-dir``; it runs in the copy, which Ray deletes with the job's runtime env)."""
    cwd = os.getcwd()
    try:
        runtime_env = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}").get("runtime_env") or {}
    except (ValueError, AttributeError):
        runtime_env = {}
    parts = cwd.split(os.sep)
    unpacked = len(parts) > 1 and parts[-2] == "working_dir_files" and parts[-1].startswith("_ray_pkg_")
    return cwd if runtime_env.get("working_dir") or unpacked else None


def temporary_root(root: str) -> str | None:
    """Why ``root`` cannot be a run's root here (one line naming ``--out``), or None: a job's run root must not lie
    in Ray's temporary copy of its working directory, where a relative root (the default ``runs/<name>``) goes."""
    copy = job_working_dir()
    if copy is None or "://" in root:
        return None
    path = os.path.abspath(os.path.expanduser(root))
    if path != copy and not path.startswith(copy.rstrip(os.sep) + os.sep):
        return None
    return (f"--out: this Ray job runs in Ray's temporary copy of its working directory ({copy}), deleted with the "
            f"job; the run root {root!r} would be written there: give --out an absolute path or an s3:// URI")


def address_of(configured: str | None) -> str:
    """The address ``ray.init`` is given: the configured one, else ``$RAY_ADDRESS``, else ``"local"`` (a new cluster)."""
    return configured or os.environ.get("RAY_ADDRESS") or "local"


def start(configured: str | None = None, **init_kwargs: Any) -> None:
    """``ray.init`` on :func:`address_of` (unless Ray is up already); a local cluster gets the watchdog."""
    import ray

    if ray.is_initialized():
        return
    address = address_of(configured)
    local = address == "local"
    if local:
        init_kwargs.setdefault("include_dashboard", False)
    ray.init(address=address, ignore_reinit_error=True, **init_kwargs)
    if local:
        watch_local_cluster()


def _node_pids() -> list[int]:
    """PIDs of the processes Ray's node started in this driver (GCS, raylet, dashboard, monitors)."""
    try:
        return ray_internals.node_pids()
    except Exception:  # noqa: BLE001 - a Ray without this attribute: fall back to the driver's children
        return [p for p, (ppid, _) in _table().items() if ppid == os.getpid()]


def watch_local_cluster() -> subprocess.Popen | None:
    """Start the watchdog of the local cluster this driver started (Linux only; once per driver)."""
    global _watchdog
    if _watchdog is not None or not os.path.isdir("/proc/self"):
        return _watchdog
    roots = _node_pids()
    if not roots:
        return None
    # stdin: a pipe whose write end only this driver holds (non-inheritable), so the driver's death closes it
    _watchdog = subprocess.Popen([sys.executable, "-m", "evalcore.core.cluster", str(os.getpid()), *map(str, roots)],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True, close_fds=True)
    return _watchdog


# ----------------------------------------------------------------------------- the watchdog process


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent PID, start time in clock ticks, state) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return int(fields[1]), int(fields[19]), fields[0]


def _table() -> dict[int, tuple[int, int]]:
    """PID → (parent PID, start time) of every live (non-zombie) process."""
    out: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))) is not None and st[2] not in ("Z", "X"):
            out[int(name)] = (st[0], st[1])
    return out


def _alive(pid: int, started: int) -> bool:
    st = _stat(pid)
    return st is not None and st[1] == started and st[2] not in ("Z", "X")


def _record(tracked: dict[int, int], roots: list[int]) -> None:
    """Add every live root and every live descendant of a tracked process to ``tracked`` (PID → start time)."""
    table = _table()
    for pid in roots:
        if pid in table:
            tracked.setdefault(pid, table[pid][1])
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = [p for p, t in tracked.items() if table.get(p, (0, -1))[1] == t]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tracked:
                tracked[child] = table[child][1]
                todo.append(child)


def _signal_all(tracked: dict[int, int], sig: int) -> list[int]:
    """Send ``sig`` to every tracked process still alive; returns those PIDs."""
    alive = [p for p, t in tracked.items() if _alive(p, t)]
    for pid in alive:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return alive


def watch(driver: int, roots: list[int]) -> None:
    """Record the cluster's processes until the driver is gone, then stop those still alive."""
    started = _stat(driver)
    tracked: dict[int, int] = {}
    while True:
        _record(tracked, roots)
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], POLL_S)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break  # the pipe closed: the driver is gone
        if started is None or not _alive(driver, started[1]):
            break
    time.sleep(SETTLE_S)
    _record(tracked, [])
    if _signal_all(tracked, signal.SIGTERM):
        deadline = time.monotonic() + GRACE_S
        while time.monotonic() < deadline and any(_alive(p, t) for p, t in tracked.items()):
            time.sleep(0.1)
        _signal_all(tracked, signal.SIGKILL)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the driver's terminal is the driver's to handle
    watch(int(sys.argv[1]), [int(a) for a in sys.argv[2:]])
