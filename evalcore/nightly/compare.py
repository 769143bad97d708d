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

Models are kept apart: ``model`` is part of every key, and the two runs' models are paired by name
(:func:`model_pairs`; two runs of one model each, as a checkpoint series' runs are, pair those two whatever their
names). A model of one run that has no partner in the other is listed (:func:`unpaired`), never mixed in.

Runs are comparable only when their *suite fingerprints* agree: the run config minus the model, storage
and Ray settings, the hash of the item set (audio locations excluded) and the metric definitions;
:func:`suite_differences` says which of these differ.
"""

from __future__ import annotations

import json
from typing import Callable

import numpy as np
import pandas as pd

from evalcore.core import storage
from evalcore.core.fingerprint import digest, fingerprint_of, suite_fingerprint, suite_parts  # noqa: F401 (API)
from evalcore.stats.aggregate import CLIP_COLUMN
from evalcore.stats.bootstrap import estimate
from evalcore.stats.mcnemar import MCNEMAR, is_binary, mcnemar
from evalcore.stats.multiplicity import CORRECTION, holm
from evalcore.stats.paired_t import PAIRED_T, paired_p

#: per-item metric column → reported name (higher is better for all of them); a published rule's strict verdict
#: (``correct_strict``) is compared beside its own (``correct``), as ``accuracy_strict`` beside ``accuracy``
METRICS = {"correct": "accuracy", "correct_strict": "accuracy_strict", "f1": "f1", "precision": "precision", "recall": "recall", "bleu": "bleu",
           "bleu4": "bleu4", "meteor": "meteor", "rouge": "rouge", "bertscore": "bertscore", "cider": "cider",
           "claptext": "claptext"}
CONTROLS = ("random", "noise", "silence", "text_only")
CONDITIONS = ("correct", *CONTROLS)
KEYS = ["model", "protocol", "dataset", "condition", "variant", "metric", "group"]
COLUMNS = KEYS + ["reference_model", "direction", "n", "reference_value", "value", "delta", "ci_low", "ci_high", "ci_unit", "clusters",
                  "test", "p_value"]
#: regressions.parquet: every finished checkpoint against its previous checkpoint and the baseline
REGRESSION_COLUMNS = ["series", "checkpoint", "reference", "reference_role", *KEYS, "reference_model", "direction", "n",
                      "reference_value", "value", "delta", "ci_low", "ci_high", "ci_unit", "clusters", "test",
                      "p_value", "p_adjusted", "correction", "min_effect", "flagged", "improved"]
#: changes when the rows compare_scores writes change (part of the nightly's cache key; 4: accuracy_strict)
VERSION = 4


# ----------------------------------------------------------------------------- fingerprints


# digest, suite_parts and suite_fingerprint live in evalcore/core/fingerprint.py (the trackers tag runs with it too)


def _shown(v: object, width: int = 40) -> str:
    text = json.dumps(v, sort_keys=True, default=str, ensure_ascii=False)  # "−" as printed, not as an escape
    return text if len(text) <= width else text[:width - 1] + "…"


def _flat(cfg: object, prefix: str = "") -> dict[str, object]:
    """A config as dotted field → value (lists of named entries, e.g. protocols, keyed by their names)."""
    if isinstance(cfg, dict):
        out: dict[str, object] = {}
        for k, v in cfg.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out or {prefix.rstrip("."): {}}
    if isinstance(cfg, list) and cfg and all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in cfg):
        return {k: v for x in cfg for k, v in _flat({kk: vv for kk, vv in x.items() if kk != "name"},
                                                    f"{prefix}{x['name']}.").items()}
    return {prefix.rstrip("."): cfg}


def suite_differences(a: dict, b: dict, limit: int = 4) -> list[str]:
    """What differs between two runs' :func:`suite_parts` (RUN_A's ``a``, RUN_B's ``b``), one short phrase each:
    items added or removed (with counts and a few ids), items whose content differs, config fields, metric
    definitions."""
    out = []
    ia = {(r["dataset"], r["item_id"]): r for r in a["items"]}
    ib = {(r["dataset"], r["item_id"]): r for r in b["items"]}

    def ids(keys: list) -> str:
        shown = ", ".join(f"{d}/{i}" for d, i in sorted(keys)[:3])
        return shown + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")

    added, removed = [k for k in ib if k not in ia], [k for k in ia if k not in ib]
    if added:
        out.append(f"{len(added)} item(s) only in RUN_B ({ids(added)})")
    if removed:
        out.append(f"{len(removed)} item(s) only in RUN_A ({ids(removed)})")
    changed = [k for k in ia if k in ib and ia[k] != ib[k]]
    if changed:
        fields = sorted({f for k in changed for f in set(ia[k]) | set(ib[k]) if ia[k].get(f) != ib[k].get(f)})
        out.append(f"{len(changed)} shared item(s) differ in {', '.join(fields[:limit])} ({ids(changed)})")
    fa, fb = _flat(a["config"]), _flat(b["config"])
    fields = sorted(f for f in set(fa) | set(fb) if fa.get(f, "∅") != fb.get(f, "∅"))
    for f in fields[:limit]:
        out.append(f"config {f}: {_shown(fa.get(f, '(unset)'))} ≠ {_shown(fb.get(f, '(unset)'))}")
    if len(fields) > limit:
        out.append(f"{len(fields) - limit} more config field(s)")
    da, db = dict(a["definitions"]), dict(b["definitions"])
    metrics = sorted(m for m in set(da) | set(db) if da.get(m) != db.get(m))
    for m in metrics[:limit]:
        out.append(f"metric {m}: definition {_shown(da.get(m, '(none)'), 60)} ≠ {_shown(db.get(m, '(none)'), 60)}")
    if len(metrics) > limit:
        out.append(f"{len(metrics) - limit} more metric definition(s)")
    return out


# ----------------------------------------------------------------------------- per-item scores


def load_scores(run_root: str) -> pd.DataFrame:
    """Long table (model, protocol, dataset, condition, variant, group, metric, item_id, clip_id, score) of a run:
    one score per model and item (option orders averaged), groups ``all`` and ``task=<t>`` for protocols with
    several tasks; ``clip_id`` null for runs written before clips were recorded (each item then is its own clip)."""
    pi = storage.read_parquet(storage.join(run_root, "tables", "per_item.parquet")).to_pandas()
    if CLIP_COLUMN not in pi.columns:
        pi[CLIP_COLUMN] = None
    if "model" not in pi.columns:  # a table of one unnamed model
        pi["model"] = ""
    cols = [c for c in METRICS if c in pi.columns]
    keys = ["model", "protocol", "dataset", "condition", "variant", "task"]
    long = pi.melt(id_vars=[*keys, "item_id", CLIP_COLUMN], value_vars=cols, var_name="metric",
                   value_name="score").dropna(subset=["score"])
    long["metric"] = long["metric"].map(METRICS)
    long = long.groupby([*keys, "metric", "item_id"], as_index=False,
                        dropna=False).agg(score=("score", "mean"), clip_id=(CLIP_COLUMN, "first"))
    tasks = long.groupby("protocol")["task"].nunique()
    by_task = long[long["protocol"].map(tasks) > 1].assign(group=lambda d: "task=" + d["task"].astype(str))
    return pd.concat([long.assign(group="all"), by_task], ignore_index=True).drop(columns="task")


def _models(scores: pd.DataFrame) -> list[str]:
    return sorted(set(scores["model"].astype(str))) if "model" in scores.columns and len(scores) else []


def model_pairs(cur: list[str], ref: list[str]) -> list[tuple[str, str]]:
    """(current model, reference model) pairs: the models both runs have, by name; when the runs share no name
    and each has exactly one model (two checkpoints of a series, or of two series), those two."""
    shared = [m for m in cur if m in ref]
    if shared:
        return [(m, m) for m in shared]
    return [(cur[0], ref[0])] if len(cur) == 1 and len(ref) == 1 else []


def unpaired(cur: pd.DataFrame, ref: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(models of the current run, models of the reference run) that :func:`model_pairs` leaves without a partner:
    they are listed, never compared."""
    c, r = _models(cur), _models(ref)
    pairs = model_pairs(c, r)
    return [m for m in c if m not in {p[0] for p in pairs}], [m for m in r if m not in {p[1] for p in pairs}]


def with_gaps(scores: pd.DataFrame) -> pd.DataFrame:
    """``scores`` plus listening-gap rows (condition ``correct-<control>``: per model and item, correct − control)."""
    keys = ["model", "protocol", "dataset", "variant", "group", "metric", "item_id"]
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


def direction(condition: str) -> str:
    """``higher`` is better for the correct condition and listening gaps; controls have none."""
    return "higher" if condition == "correct" or condition.startswith("correct-") else "none"


def compare_scores(cur: pd.DataFrame, ref: pd.DataFrame, resamples: int, confidence: float,
                   seed: int) -> pd.DataFrame:
    """One row per comparison key: paired difference cur − ref over shared items, CI and raw p-value; the models of
    the two runs paired by :func:`model_pairs` (``model`` the current run's, ``reference_model`` its partner)."""
    cur, ref = (df if "model" in df.columns else df.assign(model="") for df in (cur, ref))  # one model, unnamed
    pairs = model_pairs(_models(cur), _models(ref))
    cur, ref = with_gaps(cur), with_gaps(ref)
    partner = {c: r for c, r in pairs}
    cur = cur[cur["model"].astype(str).isin(partner)]
    ref = ref[ref["model"].astype(str).isin(set(partner.values()))].copy()
    ref["reference_model"] = ref["model"].astype(str)
    ref["model"] = ref["model"].astype(str).map({r: c for c, r in pairs})
    merged = cur.assign(model=cur["model"].astype(str)).merge(ref, on=KEYS + ["item_id"], suffixes=("", "_ref"))
    rows = []
    first: Callable[[np.ndarray], np.ndarray] = lambda m: m[..., 0]  # noqa: E731
    ci = KEYS.index("condition")
    for key, g in merged.groupby(KEYS, sort=True):
        d = (g["score"] - g["score_ref"]).to_numpy(dtype=float)
        clusters = _clips(g)
        e = estimate(d[:, None], first, resamples=resamples, confidence=confidence, seed=seed, clusters=clusters)
        rows.append({**dict(zip(KEYS, key)), "reference_model": partner[key[0]], "direction": direction(key[ci]),
                     "n": len(d), "reference_value": float(g["score_ref"].mean()), "value": float(g["score"].mean()),
                     "delta": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "ci_unit": e.unit,
                     "clusters": e.clusters, **_test(key[KEYS.index("metric")], key[ci],
                                                     g["score"].to_numpy(dtype=float),
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
    if metric in ("accuracy", "accuracy_strict") and condition in CONDITIONS and len(d) and is_binary(cur, ref):
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
