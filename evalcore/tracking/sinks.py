"""Send a finished run to its configured sinks: the run's last stage, the nightly's per-checkpoint call and
``evalcore track`` all come here.

Failure never costs results: this runs after every file of the run is written, and nothing it meets (a missing
package, an unreachable or refusing tracker, a wrong URI) is raised. Each failing sink is one warning naming the
sink and the error's class, with its reason bounded, URLs cut to their host (no path, query or credentials) and
the environment's tokens masked; the warning says how to log the run later (``evalcore track RUN_ROOT``).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from evalcore.errors import bounded
from evalcore.packages import missing
from evalcore.tracking import lm_eval_files, mlflow_sink, wandb_sink
from evalcore.tracking.record import Checkpoint, FinishedRun
from evalcore.tracking_config import TRACKING_EXTRA, LmEvalSink, MlflowSink, WandbSink

log = logging.getLogger("evalcore")

Sink = MlflowSink | WandbSink | LmEvalSink
#: kind → (the function that logs one model, the modules it needs)
WRITERS: dict[str, tuple[Callable[..., str], tuple[str, ...]]] = {
    "mlflow": (mlflow_sink.log_model, ("mlflow",)),
    "wandb": (wandb_sink.log_model, ("wandb",)),
    "lm_eval": (lm_eval_files.write, ()),
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
    return missing(WRITERS[kind][1])


def install_hint(kind: str) -> str:
    return f"needs {', '.join(needs(kind))}, which does not import here; install: {TRACKING_EXTRA}"


def track_run(sinks: Sequence[Sink], root: str, checkpoint: Checkpoint | None = None,
              models: Iterable[str] | None = None) -> list[Logged]:
    """Log the finished run at ``root`` (each of ``models``, default all) to every sink; returns the outcomes.
    Never raises: a failing sink is one warning."""
    if not sinks:
        return []
    run = FinishedRun(root)
    later = f"`evalcore track {root}` logs it later"
    try:
        names = list(models) if models is not None else run.models
    except Exception as e:  # noqa: BLE001 - not a finished run: nothing to log, and the run itself is not failed
        log.warning("WARNING: tracking: %s holds no finished run to log (%s: %s)", root, type(e).__name__, scrub(e))
        return []
    out: list[Logged] = []
    for sink in sinks:
        write, _ = WRITERS[sink.kind]
        if needs(sink.kind):
            said = f"{sink.kind} sink skipped: {install_hint(sink.kind)}; the run's files are written, {later}"
            log.warning("WARNING: tracking: %s", said)
            out += [Logged(sink.kind, m, False, said) for m in names]
            continue
        for model in names:
            try:
                said = write(sink, run, model, checkpoint)
            except Exception as e:  # noqa: BLE001 - a tracker's failure is a warning, never the run's
                log.debug("tracking: %s failed", sink.kind, exc_info=True)
                said = (f"{sink.kind} sink failed ({type(e).__name__}: {scrub(e)}); the run's files are written, "
                        f"{later}")
                log.warning("WARNING: tracking: %s", said)
                out.append(Logged(sink.kind, model, False, said))
                break  # one warning per sink: the next model would meet the same tracker
            log.info("tracking: %s: %s: %s", sink.kind, model, said)
            out.append(Logged(sink.kind, model, True, said))
    return out
