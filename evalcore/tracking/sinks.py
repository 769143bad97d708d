"""Send a finished run to its configured sinks: the run's last stage, the nightly's per-checkpoint call and
``evalcore track`` all come here.

In two steps, so that a run can log while it renders its report (:mod:`evalcore.tracking.process`):
:func:`begin` logs everything but the report once the run's tables are written; :meth:`Begun.end` logs the report
and closes each tracker's run (or, when the run failed, marks it failed). :func:`track_run` does both in turn, for
a run that is already finished (the nightly's checkpoints, ``evalcore track``).

Failure never costs results: this reads the run's files once they are written, and nothing it meets (a missing
package, an unreachable or refusing tracker, a wrong URI) is raised. Each failing sink is one warning naming the
sink and the error's class, with its reason bounded, URLs cut to their host (no path, query or credentials) and
the environment's tokens masked; the warning says how to log the run later (``evalcore track RUN_ROOT``).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from evalcore.core.errors import bounded
from evalcore.core.packages import missing
from evalcore.tracking import lm_eval_files, mlflow_sink, wandb_sink
from evalcore.tracking.record import Checkpoint, FinishedRun
from evalcore.core.tracking_config import TRACKING_EXTRA, LmEvalSink, MlflowSink, WandbSink

log = logging.getLogger("evalcore")

Sink = MlflowSink | WandbSink | LmEvalSink
#: the rest of a sink's logging of one model, once the run finished with its report (True) or failed (False);
#: it returns what was done
Rest = Callable[[bool], str]
#: kind → (the function that logs one model but its report, the function that imports it ahead, its modules)
WRITERS: dict[str, tuple[Callable[..., Rest], Callable[[Any], None] | None, tuple[str, ...]]] = {
    "mlflow": (mlflow_sink.begin, mlflow_sink.warm, ("mlflow",)),
    "wandb": (wandb_sink.begin, wandb_sink.warm, ("wandb",)),
    "lm_eval": (lm_eval_files.begin, None, ()),
}
#: environment variables whose values never appear in a warning
SECRET_ENV = ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_USERNAME", "WANDB_API_KEY",
              "DATABRICKS_TOKEN", "AWS_SECRET_ACCESS_KEY")
_URL = re.compile(r"\b([a-z][a-z0-9+.-]*)://(?:[^\s/'\"@]*@)?([^\s/'\"?#]*)[^\s'\"]*", re.I)


@dataclass(frozen=True)
class Logged:
    """One sink's outcome for one model: ``ok`` and what it did, or the warning it gave."""

    sink: str
    model: str
    ok: bool
    said: str


def scrub(text: object) -> str:
    """An error's text fit for a warning: URLs cut to scheme and host, known tokens masked, bounded."""
    s = _URL.sub(lambda m: f"{m.group(1)}://{m.group(2)}", str(text))
    for name in SECRET_ENV:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            s = s.replace(value, "***")
    return bounded(s, 240)


def needs(kind: str) -> list[str]:
    """The modules a sink needs that do not import here."""
    return missing(WRITERS[kind][2])


def install_hint(kind: str) -> str:
    return f"needs {', '.join(needs(kind))}, which does not import here; install: {TRACKING_EXTRA}"


def usable(sinks: Sequence[Sink]) -> tuple[list[Sink], list[Sink]]:
    """The sinks whose packages import here, and those that do not."""
    ok = [s for s in sinks if not needs(s.kind)]
    return ok, [s for s in sinks if needs(s.kind)]


def warm(sinks: Sequence[Sink]) -> None:
    """Import each sink's package and open its store ahead of the logging (a process that logs later does this
    while the run scores). Never raises: what fails here fails again, and is reported, when the logging starts."""
    for sink in sinks:
        prepare = WRITERS[sink.kind][1]
        try:
            if prepare is not None:
                prepare(sink)
        except Exception:  # noqa: BLE001 - reported by the logging itself
            log.debug("tracking: %s: warm-up failed", sink.kind, exc_info=True)


def failed(sink: Sink, e: BaseException, later: str) -> str:
    """The one warning of a sink that failed: its kind and the error's class, the reason bounded and scrubbed."""
    said = f"{sink.kind} sink failed ({type(e).__name__}: {scrub(e)}); the run's files are written, {later}"
    log.warning("WARNING: tracking: %s", said)
    return said


@dataclass
class Begun:
    """What :func:`begin` logged, and the rest of each sink's logging (:meth:`end`)."""

    later: str
    done: list[Logged] = field(default_factory=list)
    rest: list[tuple[Sink, str, Rest]] = field(default_factory=list)

    def end(self, finished: bool = True) -> list[Logged]:
        """Log the report and close each tracker's run (``finished`` False: the run failed, its report may be
        missing, and each tracker's run is marked failed for ``evalcore track`` to log again); returns every
        outcome. Never raises."""
        out, broken = list(self.done), set()
        for sink, model, rest in self.rest:
            if id(sink) in broken:
                continue
            try:
                said = rest(finished)
            except Exception as e:  # noqa: BLE001 - a tracker's failure is a warning, never the run's
                log.debug("tracking: %s failed", sink.kind, exc_info=True)
                out.append(Logged(sink.kind, model, False, failed(sink, e, self.later)))
                broken.add(id(sink))
                continue
            log.info("tracking: %s: %s: %s", sink.kind, model, said)
            out.append(Logged(sink.kind, model, True, said))
        self.rest = []
        return out


def begin(sinks: Sequence[Sink], root: str, checkpoint: Checkpoint | None = None,
          models: Iterable[str] | None = None) -> Begun:
    """Log the run at ``root`` (each of ``models``, default all) to every sink, all but its report (its tables
    and run.json written). Never raises: a failing sink is one warning, and logs nothing more."""
    later = f"`evalcore track {root}` logs it later"
    begun = Begun(later)
    if not sinks:
        return begun
    run = FinishedRun(root)
    try:
        names = list(models) if models is not None else run.models
    except Exception as e:  # noqa: BLE001 - not a finished run: nothing to log, and the run itself is not failed
        log.warning("WARNING: tracking: %s holds no finished run to log (%s: %s)", root, type(e).__name__, scrub(e))
        return begun
    for sink in sinks:
        start = WRITERS[sink.kind][0]
        if needs(sink.kind):
            said = f"{sink.kind} sink skipped: {install_hint(sink.kind)}; the run's files are written, {later}"
            log.warning("WARNING: tracking: %s", said)
            begun.done += [Logged(sink.kind, m, False, said) for m in names]
            continue
        for model in names:
            try:
                begun.rest.append((sink, model, start(sink, run, model, checkpoint)))
            except Exception as e:  # noqa: BLE001 - a tracker's failure is a warning, never the run's
                log.debug("tracking: %s failed", sink.kind, exc_info=True)
                begun.done.append(Logged(sink.kind, model, False, failed(sink, e, later)))
                break  # one warning per sink: the next model would meet the same tracker
    return begun


def track_run(sinks: Sequence[Sink], root: str, checkpoint: Checkpoint | None = None,
              models: Iterable[str] | None = None) -> list[Logged]:
    """Log the finished run at ``root`` (each of ``models``, default all) to every sink; returns the outcomes.
    Never raises: a failing sink is one warning."""
    return begin(sinks, root, checkpoint, models).end(True)
