"""The long-form summary table of a run: every protocol's aggregates per cell with bootstrap CIs, paired
differences between conditions, spreads, scorer-specific rows and explicit denominators.

CIs resample clips where items of a cell share one (``ci_unit``, ``clusters``: :mod:`evalcore.stats.aggregate`).
Paired differences of accuracy with 0/1 outcomes carry McNemar's exact p-value (``test = mcnemar_exact``); the
run's McNemar p-values are one family, Holm-adjusted (``p_adjusted``, ``correction = holm``), as the nightly
adjusts the comparisons of one checkpoint."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from evalcore.core.schema import SCORE_KEY, SUMMARY, protocol_kind
from evalcore.kinds.scorer import Scorer
from evalcore.scoring.denominators import denominator_rows
from evalcore.scoring.requests import ScorerParams, _by, build_scorer
from evalcore.stats.aggregate import _keyed, aggregate, cells, contrasts
from evalcore.stats.multiplicity import CORRECTION, holm


def summary_table(per_item: pd.DataFrame, resamples: int, confidence: float, seed: int,
                  params: ScorerParams | None = None, errors: list[dict] | None = None,
                  breakdowns: bool = True) -> pa.Table:
    """Long-form summary: every aggregate per group, plus paired differences correct − other condition,
    overall (``group = all``) and per task when a protocol has several; scorers get ``params``.

    ``errors`` (the run's errored request rows) make the denominators explicit: ``errored`` per cell and the
    scorers' ``*_with_errors`` metrics (:mod:`evalcore.scoring.denominators`). ``breakdowns=False``: the group
    ``all`` only (no task or scorer breakdowns)."""
    errored = _by([r for r in errors or [] if r.get("protocol") is not None], "protocol")
    protocols = sorted(set(per_item["protocol"].dropna()) if "protocol" in per_item.columns else set()) + sorted(
        set(errored) - (set(per_item["protocol"].dropna()) if "protocol" in per_item.columns else set()))
    stats = {"resamples": resamples, "confidence": confidence, "seed": seed}
    out: list[dict] = []
    for proto in protocols:
        pdf = per_item if len(protocols) == 1 else per_item[per_item["protocol"] == proto]  # one: no copy
        kind = protocol_kind(pdf.iloc[0].to_dict() if len(pdf) else errored[proto][0])
        scorer = build_scorer(kind, params, proto)
        first = len(out)
        if len(pdf):
            out += _scored_rows(pdf, scorer, stats, breakdowns)
        else:
            pdf = pd.DataFrame(columns=[*SCORE_KEY, *scorer.columns])
        out += denominator_rows(pdf, errored.get(proto, []), scorer, **stats)
        for row in out[first:]:
            row["protocol_kind"] = kind
    _adjust(out)
    return pa.Table.from_pylist(out, schema=SUMMARY)


def _adjust(rows: list[dict]) -> None:
    """Holm-adjust every row's ``p_value`` (one family: the run's tests), in place."""
    tested = [r for r in rows if r.get("p_value") is not None and r["p_value"] == r["p_value"]]
    for r, adj in zip(tested, holm([r["p_value"] for r in tested]) if tested else []):
        r.update(p_adjusted=float(adj), correction=CORRECTION)


def _scored_rows(pdf: pd.DataFrame, scorer: Scorer, stats: dict[str, Any], breakdowns: bool = True) -> list[dict]:
    """One protocol instance's aggregates, paired differences, spreads and extra rows over its scored rows."""
    out: list[dict] = []
    by = ["protocol", "dataset", "model", "variant", "group"]
    for group, gdf, aggregates in _groups(pdf, scorer):
        if not breakdowns and group != "all":
            continue
        gdf = gdf.assign(group=group)
        out += aggregate(gdf, aggregates, by + ["condition"], item_stats=scorer.item_stats, **stats)
        out += contrasts(gdf, aggregates, by, item_stats=scorer.item_stats, **stats)
        for key, sdf in cells(gdf, by + ["condition"]):
            out += [{**_keyed(key, by + ["condition"]), "kind": "value", **r} for r in scorer.spread_rows(sdf)]
    if hasattr(scorer, "extra_rows") and breakdowns:  # e.g. mcq: which option type the answers chose
        out += scorer.extra_rows(pdf, **stats)
    return out


def _groups(pdf: pd.DataFrame, scorer: Scorer) -> list[tuple[str, pd.DataFrame, tuple]]:
    """(group, rows, aggregates) of one protocol instance: ``all`` and, when the protocol has several tasks, one
    group per task, plus the scorer's breakdowns. A scorer whose figures depend on the rows (``aggregates_for``:
    the ``mir`` scorer, one released rule per task) gets its groups and figures per dataset, tasks split only
    within a dataset that holds several."""
    if not hasattr(scorer, "aggregates_for"):
        tasks = sorted(pdf["task"].dropna().unique())
        groups = [("all", pdf)] + ([(f"task={t}", pdf[pdf["task"] == t]) for t in tasks] if len(tasks) > 1 else [])
        groups += scorer.breakdown_groups(pdf) if hasattr(scorer, "breakdown_groups") else []  # e.g. mcq: genre=…
        aggregates = scorer.aggregates_of(pdf)  # e.g. mcq under a published rule: accuracy and accuracy_strict
        return [(g, df, aggregates) for g, df in groups]
    out = []
    for _, ddf in pdf.groupby("dataset", sort=True, observed=True):
        tasks = sorted(ddf["task"].dropna().unique())
        parts = [("all", ddf)] + ([(f"task={t}", ddf[ddf["task"] == t]) for t in tasks] if len(tasks) > 1 else [])
        out += [(g, df, scorer.aggregates_for(df)) for g, df in parts]
    return out
