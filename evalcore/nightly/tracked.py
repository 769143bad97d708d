"""The nightly's trackers: each checkpoint evaluated tonight is logged once, at its training step, with its
verdict and its flagged comparisons (:func:`evalcore.tracking.sinks.track_run`).

Tonight's checkpoints only: a night that evaluates nothing logs nothing, and a checkpoint resumed after an
interrupted night is logged when its evaluation finishes, once. The MLflow sink also finds a checkpoint already
logged by its key (suite fingerprint, series, checkpoint) and adds nothing, so a replay (``evalcore track``) or a
second nightly cannot log it twice. The checkpoint runs themselves carry no tracking block
(:data:`evalcore.nightly.config.SUITE_FIELDS`): their numbers reach the trackers only from here, with a step.

The step (:mod:`evalcore.tracking.steps`): ``trainer_state.json``'s ``global_step``, else the series'
``step_pattern`` on the checkpoint's name, else the checkpoint's position in the series (1, 2, …; said in a warning).
Tonight's outcomes are read through :func:`verdict_of` and :func:`flagged_lines` alone.
"""

from __future__ import annotations

import logging

import pandas as pd

from evalcore.core import storage
from evalcore.nightly.config import NightlyConfig, SeriesConfig
from evalcore.nightly.series import discover
from evalcore.core.nightly_outcome import CheckpointKey, Tonight, Verdict
from evalcore.tracking.record import Checkpoint
from evalcore.tracking.sinks import Logged, track_run
from evalcore.tracking.steps import training_step

log = logging.getLogger("evalcore")


def verdict_of(tonight: Tonight | None, key: CheckpointKey) -> Verdict | None:
    """Tonight's verdict of checkpoint ``key`` (``regressed``, ``improved``, ``unchanged`` …)."""
    for v in tonight.checkpoints if tonight is not None else []:
        if v.key == key:
            return v.verdict
    return None


def flagged_lines(regressions: pd.DataFrame, key: CheckpointKey) -> list[str]:
    """The checkpoint's flagged comparisons, one line each (worst first)."""
    if not len(regressions):
        return []
    rows = regressions[regressions["flagged"].astype(bool) & (regressions["series"] == key.series)
                       & (regressions["checkpoint"] == key.checkpoint)]
    rows = rows.reindex(rows["delta"].abs().sort_values(ascending=False).index)
    return [f"{r.protocol}/{r.dataset} {r.condition} {r.metric} ({r.group}) vs {r.reference} ({r.reference_role}): "
            f"{r.delta:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}], p_adj={r.p_adjusted:.3g}" for r in rows.itertuples()]


def step_of(s: SeriesConfig, checkpoint: str) -> int:
    """The checkpoint's training step (its position in the series when neither file nor name gives one)."""
    found = training_step(storage.join(s.prefix, checkpoint), checkpoint, s.step_pattern)
    if found is not None:
        return found
    names = [c.name for c in discover(s)]
    at = names.index(checkpoint) + 1 if checkpoint in names else len(names) + 1
    log.warning("WARNING: tracking: %s/%s: no trainer_state.json and no step in its name (step_pattern %r); "
                "logged at its position in the series, %d", s.name, checkpoint, s.step_pattern, at)
    return at


def log_checkpoint(cfg: NightlyConfig, key: CheckpointKey, regressions: pd.DataFrame, verdict: Verdict | None,
                   run_root: str) -> list[Logged]:
    """Log the finished checkpoint ``key`` (its run at ``run_root``) to the nightly's sinks."""
    if not cfg.tracking:
        return []
    s = next(x for x in cfg.series if x.name == key.series)
    ck = Checkpoint(key.series, key.checkpoint, step_of(s, key.checkpoint), verdict, flagged_lines(regressions, key),
                    nightly=cfg.name)
    return track_run(cfg.tracking, run_root, ck, models=[key.series])
