"""``evalcore track ROOT``: send a finished run, or every finished checkpoint of a nightly, to trackers later.

The same code as a run's last stage and the nightly's per-checkpoint logging (:mod:`evalcore.tracking.sinks`),
reading only the files under ROOT: after a run whose tracker was down, a missing package, or to add a sink. The
sinks are the ``--track`` flags, else the run's own ``tracking:`` block (its config.yaml). A nightly root (one with
``ledger/``) logs each finished checkpoint with its training step (``trainer_state.json``, else ``--step-pattern``
on its name) and its verdict against the previous checkpoint and the baseline. MLflow finds what it holds already
and adds nothing; W&B runs keep their ids, so a synced replay lands in the same runs.

Exit codes: 0 every sink logged; 1 a sink failed (its warning says why; nothing under ROOT is changed); 2 ROOT is
not a finished run or nightly, or a ``--track`` flag is wrong.
"""

from __future__ import annotations

import json
import logging
from typing import Optional

import pandas as pd
import typer
from pydantic import TypeAdapter, ValidationError

from evalcore.reports import console

from evalcore.core import storage
from evalcore.core.errors import ExitCode
from evalcore.nightly.ledger import Ledger
from evalcore.nightly.series import natural_key
from evalcore.nightly.tonight import checkpoint_verdict
from evalcore.nightly.tracked import flagged_lines
from evalcore.core.nightly_outcome import Status, Tonight
from evalcore.tracking.record import Checkpoint
from evalcore.tracking.sinks import Logged, track_run
from evalcore.tracking.steps import DEFAULT_PATTERN, training_step
from evalcore.core.tracking_config import Sink, with_flags

def sinks_of(flags: list[str], saved: list[dict]) -> list:
    """The validated sinks: the flags (over the saved block's sinks of other kinds), else the saved block."""
    try:
        return TypeAdapter(list[Sink]).validate_python(with_flags(saved, flags) if flags else saved)
    except (ValidationError, ValueError) as e:
        raise typer.BadParameter(str(e).splitlines()[0] if not isinstance(e, ValidationError)
                                 else "; ".join(f"{'.'.join(map(str, x['loc'][1:]))}: {x['msg']}" for x in e.errors()),
                                 param_hint="--track") from None


def nightly_checkpoints(root: str, pattern: str) -> list[tuple[str, Checkpoint]]:
    """(run root, checkpoint) of every finished checkpoint in the nightly at ``root``, oldest first per series (a
    checkpoint whose step neither file nor name gives is logged at its position among them)."""
    regressions = pd.DataFrame()
    reg_uri = storage.join(root, "regressions.parquet")
    if storage.exists(reg_uri):
        regressions = storage.read_parquet(reg_uri).to_pandas()
    summary_uri = storage.join(root, "nightly.json")
    nightly = (Tonight.from_json(json.loads(storage.read_text(summary_uri))).name if storage.exists(summary_uri)
               else None)
    done = sorted((r for r in Ledger(root).records() if r.status is Status.FINISHED and r.run_root),
                  key=lambda r: (r.series, natural_key(r.checkpoint)))
    out, position = [], 0
    for i, r in enumerate(done):
        position = 1 if i == 0 or done[i - 1].series != r.series else position + 1
        step = training_step(r.uri or "", r.checkpoint, pattern)
        verdict = checkpoint_verdict(r.key, regressions)[0] if len(regressions) else None
        out.append((r.run_root, Checkpoint(r.series, r.checkpoint, step if step is not None else position,
                                           verdict, flagged_lines(regressions, r.key), r.suite_fingerprint, nightly)))
    return out


def track(
    root: str = typer.Argument(..., metavar="ROOT", help="A finished run's root, or a nightly's root (path or s3://)."),
    sinks: Optional[list[str]] = typer.Option(None, "--track", metavar="SINK[=VALUE]",
                                              help="A sink to log to: mlflow[=URI], wandb[=PROJECT], lm_eval[=DIR]; "
                                              "repeat for several. Default: the run's own tracking block."),
    step_pattern: str = typer.Option(DEFAULT_PATTERN, "--step-pattern", metavar="REGEX",
                                     help="A nightly's checkpoints: the regular expression whose first group is the "
                                     "training step in a checkpoint's name (a trainer_state.json wins)."),
    quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP + " Still printed: a sink that failed."),
) -> None:
    """Log a finished run (or every finished checkpoint of a nightly root) to MLflow, W&B or lm-eval's files, from
    its files alone. Exit status: 0 logged, 1 a sink failed, 2 not a finished run or a wrong --track."""
    console.setup(quiet=quiet)
    said = _Printed()  # each result is one stdout line (report), not that and the sinks' log line as well
    logging.getLogger("evalcore").addFilter(said)
    try:
        _track(root, list(sinks or []), step_pattern, quiet)
    finally:
        logging.getLogger("evalcore").removeFilter(said)


class _Printed(logging.Filter):
    """Drops the sinks' INFO line of each logged result (``tracking: <sink>: <model>: …``): :func:`report` prints it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.INFO and str(record.msg).startswith("tracking: %s: %s: %s"))


def _track(root: str, flags: list[str], step_pattern: str, quiet: bool) -> None:
    """:func:`track`'s work: the sinks, the run or the nightly's checkpoints logged, :func:`report`."""
    if storage.exists(storage.join(root, "run.json")):
        saved = (_config(root).get("tracking") or []) if not flags else []
        found = sinks_of(flags, saved)
        if not found:
            typer.echo(f"evalcore: {root} has no tracking block; name a sink with --track", err=True)
            raise typer.Exit(code=ExitCode.USAGE)
        done = track_run(found, root)
    elif storage.exists(storage.join(root, "ledger")):
        found = sinks_of(flags, [])
        if not found:
            typer.echo("evalcore: a nightly root keeps no tracking block; name a sink with --track", err=True)
            raise typer.Exit(code=ExitCode.USAGE)
        done = [x for run_root, ck in nightly_checkpoints(root, step_pattern)
                for x in track_run(found, run_root, ck, models=[ck.series])]
    else:
        typer.echo(f"evalcore: {root} holds no finished run (no run.json) and no nightly (no ledger/)", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    report(done, quiet)


def _config(root: str) -> dict:
    import yaml

    return yaml.safe_load(storage.read_text(storage.join(root, "config.yaml"))) or {}


def report(done: list[Logged], quiet: bool = False) -> None:
    """One line per sink and model on stdout (``quiet``: none); exit 1 when a sink failed (its warning is on stderr
    already)."""
    for x in done:
        if x.ok and not quiet:
            typer.echo(f"{x.sink}: {x.model}: {x.said}")
    if any(not x.ok for x in done):
        raise typer.Exit(code=ExitCode.FAILED)

