"""Explicit denominators: errored requests per summary cell, and metrics that count them.

Every metric of a cell (protocol, dataset, model, variant, condition) is computed over its *scored*
requests; requests that errored (expand, decode, model, judge or score stage) are left out of it.
So that this is never silent, each cell also gets

* ``errored`` — how many of its requests errored (0 included; the rows are in
  ``tables/errors.parquet``), overall and per task when a protocol has several;
* the scorer's ``with_errors`` aggregates — the same metric with each errored request counted the
  way an answer that says nothing counts (:meth:`evalcore.kinds.scorer.Scorer.error_fill`): MCQ
  ``accuracy_with_errors`` (an errored request is wrong; under a published rule ``accuracy_strict_with_errors``
  beside it), factual ``recall_micro_with_errors`` /
  ``f1_micro_with_errors`` (an errored request predicts no label), binary choice likewise, true/false
  ``accuracy_<rule>_with_errors``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalcore.core.schema import ERRORED, ERRORED_DEFINITION
from evalcore.kinds.scorer import Scorer
from evalcore.stats.aggregate import aggregate

__all__ = ["ERRORED", "ERRORED_DEFINITION", "denominator_rows"]

CELL = ["protocol", "dataset", "model", "variant", "condition"]
_ROW_FIELDS = (*CELL, "item_id", "task", "labels", "options", "correct_index")


def _groups(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    tasks = sorted(df["task"].dropna().unique()) if "task" in df.columns else []
    return [("all", df)] + ([(f"task={t}", df[df["task"] == t]) for t in tasks] if len(tasks) > 1 else [])


def denominator_rows(scored: pd.DataFrame, errored: list[dict[str, Any]], scorer: Scorer, *, resamples: int,
                     confidence: float, seed: int) -> list[dict[str, Any]]:
    """``errored`` rows per cell and the scorer's ``with_errors`` aggregates, for one protocol instance's
    scored per-item rows and its errored request rows."""
    err = pd.DataFrame([{k: r.get(k) for k in _ROW_FIELDS} for r in errored], columns=list(_ROW_FIELDS))
    keys = scored.reindex(columns=[*CELL, "task"]).assign(_errored=0)  # a column scored lacks: null
    cells = pd.concat([keys, err[CELL + ["task"]].assign(_errored=1)], ignore_index=True) if len(err) else keys
    out: list[dict[str, Any]] = []
    for group, g in _groups(cells):
        for key, n in g.groupby(CELL, sort=True, dropna=False)["_errored"].sum().items():  # errored per cell
            n = int(n)
            out.append({**dict(zip(CELL, key)), "group": group, "kind": "value", "metric": ERRORED, "value": float(n),
                        "ci_low": float("nan"), "ci_high": float("nan"), "n": n, "definition": ERRORED_DEFINITION})
    with_errors = scorer.with_errors_of(scored)  # e.g. mcq under a published rule: accuracy_strict_with_errors too
    if not with_errors:
        return out
    columns = sorted({c for a in with_errors for c in a.columns})
    keep = [*CELL, "item_id", "task", *(["clip_id"] if "clip_id" in scored.columns else [])]  # clips resample
    filled = pd.DataFrame([{**{k: r.get(k) for k in keep}, **scorer.error_fill(r)}
                           for r in errored], columns=[*keep, *columns])
    every = pd.concat([scored[[*keep, *columns]], filled], ignore_index=True)
    for group, g in _groups(every):
        out += aggregate(g.assign(group=group), with_errors, [*CELL[:4], "group", "condition"],
                         item_stats=scorer.item_stats, resamples=resamples, confidence=confidence, seed=seed)
    return out
