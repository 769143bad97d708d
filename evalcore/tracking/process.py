"""A run's trackers log beside its last stage, in a process of their own.

A run with a ``tracking:`` block starts the process when its score stage starts (:func:`beside`). The process
imports the sinks' packages and opens their stores while the run scores; once the run's tables and run.json are
written (:meth:`Beside.tables_written`) it logs everything but the report (params, metrics, tables) while the run
renders its report; when the run ends (:meth:`Beside.end`) it logs the report and closes each tracker's run, or
marks it failed when the run failed. So the run waits only for what is left when its report is done: logging
10,000 cells to MLflow's sqlite store is seconds of Python, which in the run's own process would follow the
report and hold the interpreter while it renders. (W&B's client works the same way: a service process beside the
training.)

The process runs at a lower CPU priority (:data:`NICE`), so where it shares a core with the run's own stages they
come first. It inherits the run's environment (credentials stay there, never in a message) and working directory (a
relative ``sqlite:///mlflow.db`` is the same file), gets the run's storage settings (endpoints, no keys), and sends
back its outcomes and its log lines, which the run logs as its own. A sink whose package does not import in the
run's interpreter is skipped here, with its warning, and never sent. Should the process fail to start, the run logs
in its own process instead; should it die or not answer within :data:`DEADLINE_S`, the run says so in one warning
(the run's files are written either way, and ``evalcore track RUN_ROOT`` logs them later).

Messages are JSON lines: to the process ``{"root", "sinks", "storage"}``, then ``{"step": "tables"}``, then
``{"step": "end", "finished": bool}`` (end of input: the run died, the trackers' runs are marked failed); from it one
line ``{"records": [[level, text], …], "logged": [[sink, model, ok, said], …]}``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import subprocess
import sys
import threading
import time
from typing import Any, Iterator, Sequence

from pydantic import TypeAdapter

from evalcore.core import storage
from evalcore.tracking.sinks import Begun, Logged, Sink, begin, scrub, usable, warm
from evalcore.core.tracking_config import Sinks

log = logging.getLogger("evalcore")
#: how much lower the process's CPU priority is than the run's (``os.nice``)
NICE = 10
#: seconds the run waits, after its report, for the process to answer before it stops it (docs/tracking.md: a
#: tracker that does not answer costs the run at most this; a responsive one is done in a fraction of a second)
DEADLINE_S = 120.0


class Beside:
    """The run's side of the trackers' process (or, when it cannot start, the same logging in the run's process)."""

    def __init__(self, sinks: Sequence[Sink], root: str) -> None:
        self.root, self.later = root, f"`evalcore track {root}` logs it later"
        self.sinks, self.missing = usable(sinks)
        self.local: Begun | None = None  # the sinks that cannot log here (their warnings), or all when no process
        self.proc: subprocess.Popen | None = None
        self.waited_s: float | None = None
        self.outcomes: list[Logged] | None = None  # once ended
        if self.sinks:
            self.proc = self._start()

    def _start(self) -> subprocess.Popen | None:
        settings = storage.current()
        first = {"root": self.root, "sinks": [s.model_dump() for s in self.sinks],
                 "storage": {"s3": dataclasses.asdict(settings.s3), "read_timeout_s": settings.read_timeout_s}}
        try:
            proc = subprocess.Popen([sys.executable, "-m", "evalcore.tracking.process"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
        except OSError as e:
            log.warning("WARNING: tracking: cannot start the trackers' process (%s: %s); the run logs them itself",
                        type(e).__name__, scrub(e))
            return None
        return proc if self._send(proc, first) else None

    def _send(self, proc: subprocess.Popen, message: dict[str, Any]) -> bool:
        try:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            return True
        except (OSError, ValueError):  # the process died: said at the end, with its exit code
            return False

    def tables_written(self) -> None:
        """The run's tables and run.json are written: the process logs all but the report (the run goes on)."""
        if self.proc is not None:
            self._send(self.proc, {"step": "tables"})
            self.local = begin(self.missing, self.root)
        else:
            self.local = begin(self.missing + self.sinks, self.root)

    def end(self, finished: bool) -> list[Logged]:
        """The run ended (``finished``: with its report, else failed): wait for the trackers; their outcomes, each
        said in the run's log; the same outcomes again when called again. Never raises."""
        if self.outcomes is not None:
            return self.outcomes
        t = time.perf_counter()
        out = self.local.end(finished) if self.local is not None else []
        if self.proc is not None:
            out += self._answer(finished)
        self.waited_s = time.perf_counter() - t
        self.outcomes = out
        return out

    def _answer(self, finished: bool) -> list[Logged]:
        """The process's answer, read up to its end of output (its last line) within :data:`DEADLINE_S`; the
        process is not waited for beyond that (its interpreter's teardown takes a second with MLflow loaded)."""
        proc = self.proc
        self._send(proc, {"step": "end", "finished": finished})
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.close()
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(proc.stdout.read()), daemon=True)
        reader.start()
        reader.join(DEADLINE_S)
        if reader.is_alive():
            proc.kill()
            return self._lost(f"gave no answer within {DEADLINE_S:.0f} s and was stopped")
        threading.Thread(target=proc.wait, daemon=True).start()  # reaped when it has torn down
        try:
            answer = json.loads(got[0].strip().splitlines()[-1])
            records, logged = answer["records"], answer["logged"]
        except (IndexError, KeyError, TypeError, ValueError):
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                code = "none yet"
            return self._lost(f"ended without its answer (exit code {code})")
        for level, line in records:
            log.log(int(level), "%s", line)
        return [Logged(*x) for x in logged]

    def _lost(self, why: str) -> list[Logged]:
        said = f"the trackers' process {why}; the run's files are written, {self.later}"
        log.warning("WARNING: tracking: %s", said)
        return [Logged(s.kind, "", False, said) for s in self.sinks]


@contextlib.contextmanager
def beside(sinks: Sequence[Sink], root: str) -> Iterator[Beside]:
    """The trackers' process for the block (the run's score and report stages): ended with ``finished`` True when
    the block ends without an error, False when it raises (the error goes on)."""
    side = Beside(sinks, root)
    try:
        yield side
    except BaseException:
        side.end(False)
        raise
    side.end(True)


# ----------------------------------------------------------------------------- the process itself


class _Kept(logging.Handler):
    """The process's log lines, kept to be sent back at the end (nothing is written to the run's console here)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[list[Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append([record.levelno, record.getMessage()])


def _read() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    return json.loads(line) if line.strip() else None


def main() -> int:
    """Read the run's messages from standard input and log as they say; the answer on standard output."""
    with contextlib.suppress(OSError, AttributeError):
        os.nice(NICE)  # the run's own stages come first where the two share a core
    answer = os.fdopen(os.dup(1), "w")  # the answer's own channel: whatever a tracker's library prints (and the
    os.dup2(2, 1)  # processes it starts) goes to standard error, never into the answer
    first = _read()
    if first is None:
        return 0
    kept = _Kept()
    evalcore_log = logging.getLogger("evalcore")
    evalcore_log.addHandler(kept)
    evalcore_log.setLevel(logging.INFO)
    evalcore_log.propagate = False
    sinks = TypeAdapter(Sinks).validate_python(first["sinks"])
    settings = storage.StorageSettings(storage.S3Options(**first["storage"]["s3"]), first["storage"]["read_timeout_s"])
    with storage.using(settings):
        warm(sinks)
        message = _read()
        begun = begin(sinks, first["root"]) if message and message.get("step") == "tables" else None
        if message is None or message.get("step") != "end":
            message = _read()
        finished = bool(message and message.get("finished"))
        done = begun.end(finished) if begun is not None else []
    answer.write(json.dumps({"records": kept.lines, "logged": [[x.sink, x.model, x.ok, x.said] for x in done]}) + "\n")
    answer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
