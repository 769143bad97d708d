"""Compare two finished runs from their ``per_item`` tables (nothing is re-run).

For every protocol × dataset × condition × variant × metric (and, for multi-task protocols, per task), and
for every listening gap (correct − random / noise / silence / text_only, per item): the paired difference
``current − reference`` over the items both runs scored, its seeded percentile bootstrap CI (resampling clips,
all questions of a clip together, where the items share clips: ``ci_unit``, ``clusters``), a p-value, and the
p-value adjusted with **Holm**'s step-down method across all comparisons of one checkpoint. The p-value's test
is named (``test``): McNemar's exact test (``mcnemar_exact``) for accuracy when every item's outcome is 0/1 in
both runs (one option order), else a paired t-test (``paired_t``) on the per-item differences. A row is
*flagged* when its direction is bad (a drop of a ``correct``-condition score or of a listening gap; scores under
the control conditions themselves have no good direction and are never flagged), its adjusted p-value is below
``alpha`` and ``|delta| ≥ min_effect``; the same rule with a gain marks it *improved*.

Runs are comparable only when their *suite fingerprints* agree: the run config minus the model, storage
and Ray settings, the hash of the item set (audio locations excluded) and the metric definitions.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from evalcore import storage
from evalcore.fingerprint import digest, suite_fingerprint  # noqa: F401 (API: the nightly's fingerprints)
from evalcore.metrics.aggregate import CLIP_COLUMN
from evalcore.metrics.bootstrap import estimate
from evalcore.metrics.mcnemar import MCNEMAR, is_binary, mcnemar
from evalcore.metrics.multiplicity import CORRECTION, holm

#: per-item metric column → reported name (higher is better for all of them)
METRICS = {"correct": "accuracy", "f1": "f1", "precision": "precision", "recall": "recall", "bleu": "bleu",
           "bleu4": "bleu4", "meteor": "meteor", "rouge": "rouge", "bertscore": "bertscore", "cider": "cider",
           "claptext": "claptext"}
CONTROLS = ("random", "noise", "silence", "text_only")
CONDITIONS = ("correct", *CONTROLS)
KEYS = ["protocol", "dataset", "condition", "variant", "metric", "group"]
COLUMNS = KEYS + ["direction", "n", "reference_value", "value", "delta", "ci_low", "ci_high", "ci_unit", "clusters",
                  "test", "p_value"]
#: regressions.parquet: every finished checkpoint against its previous checkpoint and the baseline
REGRESSION_COLUMNS = ["series", "checkpoint", "reference", "reference_role", *KEYS, "direction", "n",
                      "reference_value", "value", "delta", "ci_low", "ci_high", "ci_unit", "clusters", "test",
                      "p_value", "p_adjusted", "correction", "min_effect", "flagged", "improved"]
#: the test of a comparison that is not an accuracy with 0/1 outcomes in both runs
PAIRED_T = "paired_t"
#: changes when the rows compare_scores writes change (part of the nightly's cache key)
VERSION = 2


# ----------------------------------------------------------------------------- fingerprints


# digest and suite_fingerprint live in evalcore/fingerprint.py (the trackers tag runs with it too)


# ----------------------------------------------------------------------------- per-item scores


def load_scores(run_root: str) -> pd.DataFrame:
    """Long table (protocol, dataset, condition, variant, group, metric, item_id, clip_id, score) of a run: one
    score per item (option orders averaged), groups ``all`` and ``task=<t>`` for protocols with several tasks;
    ``clip_id`` null for runs written before clips were recorded (each item then is its own clip)."""
    pi = storage.read_parquet(storage.join(run_root, "tables", "per_item.parquet")).to_pandas()
    if CLIP_COLUMN not in pi.columns:
        pi[CLIP_COLUMN] = None
    cols = [c for c in METRICS if c in pi.columns]
    long = pi.melt(id_vars=["protocol", "dataset", "condition", "variant", "task", "item_id", CLIP_COLUMN],
                   value_vars=cols, var_name="metric", value_name="score").dropna(subset=["score"])
    long["metric"] = long["metric"].map(METRICS)
    long = long.groupby(["protocol", "dataset", "condition", "variant", "task", "metric", "item_id"],
                        as_index=False, dropna=False).agg(score=("score", "mean"), clip_id=(CLIP_COLUMN, "first"))
    tasks = long.groupby("protocol")["task"].nunique()
    by_task = long[long["protocol"].map(tasks) > 1].assign(group=lambda d: "task=" + d["task"].astype(str))
    return pd.concat([long.assign(group="all"), by_task], ignore_index=True).drop(columns="task")


def with_gaps(scores: pd.DataFrame) -> pd.DataFrame:
    """``scores`` plus listening-gap rows (condition ``correct-<control>``: per item, correct − control)."""
    keys = ["protocol", "dataset", "variant", "group", "metric", "item_id"]
    correct = scores[scores["condition"] == "correct"].set_index(keys)["score"]
    clip = (scores.set_index(keys)[CLIP_COLUMN] if CLIP_COLUMN in scores.columns else pd.Series(dtype=object))
    clip = clip[~clip.index.duplicated()]
    out = [scores]
    for c in CONTROLS:
        ctrl = scores[scores["condition"] == c].set_index(keys)["score"]
        gap = (correct - ctrl).dropna()
        if len(gap):
            out.append(gap.rename("score").to_frame().assign(**{CLIP_COLUMN: clip.reindex(gap.index)})
                       .reset_index().assign(condition=f"correct-{c}"))
    return pd.concat(out, ignore_index=True)


# ----------------------------------------------------------------------------- tests


def paired_p(d: np.ndarray) -> float:
    """Two-sided paired t-test p-value of mean(d) = 0 (0 / 1 when every difference is the same)."""
    from scipy import stats

    if len(d) < 2 or np.allclose(d, d[0]):
        return 1.0 if np.allclose(d, 0.0) else (0.0 if len(d) >= 2 else 1.0)
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def direction(condition: str) -> str:
    """``higher`` is better for the correct condition and listening gaps; controls have none."""
    return "higher" if condition == "correct" or condition.startswith("correct-") else "none"


def compare_scores(cur: pd.DataFrame, ref: pd.DataFrame, resamples: int, confidence: float,
                   seed: int) -> pd.DataFrame:
    """One row per comparison key: paired difference cur − ref over shared items, CI and raw p-value."""
    cur, ref = with_gaps(cur), with_gaps(ref)
    merged = cur.merge(ref, on=KEYS + ["item_id"], suffixes=("", "_ref"))
    rows = []
    first: Callable[[np.ndarray], np.ndarray] = lambda m: m[..., 0]  # noqa: E731
    for key, g in merged.groupby(KEYS, sort=True):
        d = (g["score"] - g["score_ref"]).to_numpy(dtype=float)
        clusters = _clips(g)
        e = estimate(d[:, None], first, resamples=resamples, confidence=confidence, seed=seed, clusters=clusters)
        rows.append({**dict(zip(KEYS, key)), "direction": direction(key[2]), "n": len(d),
                     "reference_value": float(g["score_ref"].mean()), "value": float(g["score"].mean()),
                     "delta": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "ci_unit": e.unit,
                     "clusters": e.clusters, **_test(key[4], key[2], g["score"].to_numpy(dtype=float),
                                                     g["score_ref"].to_numpy(dtype=float), d)})
    return pd.DataFrame(rows, columns=COLUMNS)


def _clips(g: pd.DataFrame) -> np.ndarray | None:
    """Each compared item's clip (the current run's, else the reference's); None when neither run recorded clips."""
    cols = [c for c in (CLIP_COLUMN, f"{CLIP_COLUMN}_ref") if c in g.columns]
    if not cols:
        return None
    clip = g[cols[0]] if len(cols) == 1 else g[cols[0]].where(g[cols[0]].notna(), g[cols[1]])
    return clip.to_numpy(dtype=object)


def _test(metric: str, condition: str, cur: np.ndarray, ref: np.ndarray, d: np.ndarray) -> dict[str, object]:
    """McNemar's exact test for the accuracy of a condition (not a gap) with 0/1 outcomes in both runs, else the
    paired t-test of the per-item differences."""
    if metric == "accuracy" and condition in CONDITIONS and len(d) and is_binary(cur, ref):
        return {"test": MCNEMAR, "p_value": mcnemar(cur, ref).p_value}
    return {"test": PAIRED_T, "p_value": paired_p(d)}


def decide(rows: pd.DataFrame, min_effect: Callable[[str], float], alpha: float) -> pd.DataFrame:
    """Holm-adjust every row's p-value (one family: all comparisons of one checkpoint) and flag regressions."""
    rows = rows.copy()
    rows["p_adjusted"] = holm(rows["p_value"].to_numpy()) if len(rows) else []
    rows["correction"] = CORRECTION
    rows["min_effect"] = [min_effect(m) for m in rows["metric"]]
    significant = (rows["direction"] == "higher") & (rows["p_adjusted"] < alpha) & (
        rows["delta"].abs() >= rows["min_effect"])
    rows["flagged"] = (significant & (rows["delta"] < 0)).astype(bool)
    rows["improved"] = (significant & (rows["delta"] > 0)).astype(bool)
    return rows
