"""Consistency across paraphrases: whether a model picks the same option whatever the wording of the question and
its options and whatever their order.

Over one model's answers to an item under ``correct`` and every ``paraphrase_<j>`` condition of the run, each in
every option order, an item is consistent when every one of them named an option and all name the same one — a
paraphrased option mapped back to the option it rewords (the item's ``metadata.paraphrase_of``, written by the
condition). Only items answered under all those conditions count. One row per protocol instance × dataset × model ×
variant: ``condition = correct+paraphrases``, metric ``paraphrase_consistency``, with a bootstrap CI (clips resampled
where questions share one). Accuracy per paraphrase and the paired differences correct − paraphrase_j are the
summary's usual rows.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from evalcore.conditions.base import known
from evalcore.core.seeding import derive_seed
from evalcore.scorers.mcq_orders import chosen_option
from evalcore.stats.aggregate import mean_of
from evalcore.stats.bootstrap import estimate

METRIC = "paraphrase_consistency"
CONDITION = "correct+paraphrases"
DEFINITION = ("share of questions answered, in every option order of the question as written and of each of its "
              "paraphrases, with the same option (a paraphrased option mapped back to the one it rewords)")
KEYS = ("protocol", "dataset", "model", "variant")


def _paraphrased(written: Any) -> bool:
    c = known(written)
    return c is not None and c.paraphrase is not None


def _canonical(options: Any, parsed: Any, metadata: Any) -> str | None:
    """The written text of the option an answer chose (None: no option named)."""
    text = chosen_option(list(options), -1 if parsed is None or parsed != parsed else int(parsed))
    if text is None:
        return None
    meta = json.loads(metadata) if isinstance(metadata, str) and metadata else {}
    return meta.get("paraphrase_of", {}).get(text, text)


def paraphrase_rows(df: pd.DataFrame, *, resamples: int, confidence: float, seed: int) -> list[dict[str, Any]]:
    """The ``paraphrase_consistency`` rows (none without a paraphrase condition)."""
    if df.empty or "condition" not in df.columns:
        return []
    conds = df["condition"].astype(str)
    para = conds.map(_paraphrased).astype(bool)
    if not para.any():
        return []
    work = df[para | (conds == "correct")]
    work = work.assign(_chosen=[_canonical(o, p, m) for o, p, m in
                                zip(work["options"], work["parsed_index"], work["metadata"])],
                       _cond=work["condition"].astype(str))
    rows: list[dict[str, Any]] = []
    for key, g in work.groupby(list(KEYS), sort=True, dropna=False, observed=True):
        everywhere = g.groupby("item_id")["_cond"].nunique() == g["_cond"].nunique()
        g = g[g["item_id"].isin(everywhere[everywhere].index)]
        if g.empty:
            continue
        per_q = g.groupby("item_id", sort=True)["_chosen"].agg(lambda s: float(s.notna().all() and s.nunique() == 1))
        clip = g.groupby("item_id", sort=True)["clip_id"].first() if "clip_id" in g.columns else None
        e = estimate(per_q.to_numpy()[:, None], mean_of(), resamples=resamples, confidence=confidence,
                     seed=derive_seed("bootstrap-paraphrase", seed, *key),
                     clusters=None if clip is None else clip.reindex(per_q.index).to_numpy(dtype=object))
        rows.append({**dict(zip(KEYS, key)), "condition": CONDITION, "group": "all", "kind": "value",
                     "metric": METRIC, "value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n,
                     "ci_unit": e.unit, "clusters": e.clusters, "definition": DEFINITION})
    return rows
