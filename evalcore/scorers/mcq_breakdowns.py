"""Multiple-choice breakdowns of a run's per-item rows, and which option type each answer chose.

* :func:`breakdown_groups` — ``(group label, rows)`` per value of each breakdown: ``category``,
  ``secondary_category`` (HumMusQA ``secondary_categories``), ``difficulty``, ``dimension``
  (MuChoMusic ``music_knowledge`` / ``music_reasoning``: ``knowledge`` and ``reasoning`` overall, then
  ``knowledge/<dim>`` and ``reasoning/<dim>``) and ``genre`` (one string per question, kept whole). A question with several values (lists) is counted under
  each. A breakdown is skipped when no row has a value, when it has a single value covering every
  row (it would repeat ``all``) or when it splits the rows exactly like ``task`` (the summary
  already has ``task=`` groups).
* :func:`chosen_type_rows` — for items whose metadata maps option types to texts
  (``options_by_type``, MuChoMusic: correct, IR, CU, IU), the share of responses that chose each
  type (and ``none`` = unanswered), as long-form rows with ``group = "chosen=<type>"`` and metric
  ``chosen_share``: the mean over questions of each question's share of orders choosing that type,
  with a bootstrap CI over questions (over clips where questions share one).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np
import pandas as pd

from evalcore.core.seeding import derive_seed
from evalcore.stats.aggregate import mean_of
from evalcore.stats.bootstrap import estimate

__all__ = ["BREAKDOWNS", "as_labels", "breakdown_values", "breakdown_groups", "chosen_type", "chosen_type_rows",
           "CHOSEN_METRIC", "CHOSEN_DEFINITION"]

CHOSEN_METRIC = "chosen_share"
CHOSEN_DEFINITION = ("share of responses choosing an option of this type (correct, IR = incorrect but related, "
                     "CU = correct but unrelated, IU = incorrect and unrelated, none = unanswered): mean over "
                     "questions of each question's share of orders")
KEYS = ["protocol", "dataset", "model", "variant", "condition"]


def _meta(v: Any) -> dict:
    if isinstance(v, dict):
        return v
    try:
        m = json.loads(v) if isinstance(v, str) else {}
    except ValueError:
        return {}
    return m if isinstance(m, dict) else {}


def _label(x: Any) -> str | None:
    """A breakdown label from a scalar (text, number, boolean); None for a missing or empty value, an object
    or a list (never printed raw into a group name)."""
    if isinstance(x, (bool, np.bool_, str, int, np.integer)) or (isinstance(x, (float, np.floating)) and x == x):
        return str(x) if str(x) != "" else None
    return None


def as_labels(v: Any) -> list[str]:
    """The breakdown labels of one value: a scalar's, or those of each scalar in a list (objects left out)."""
    if isinstance(v, (list, tuple, np.ndarray)):
        return [lab for x in v if (lab := _label(x)) is not None]
    lab = _label(v)
    return [] if lab is None else [lab]


_as_list = as_labels


def _dimension(row: dict) -> list[str]:
    """MuChoMusic's categories: ``knowledge`` / ``reasoning`` overall (a question with any dimension of the
    category, as the released scorer's Knowledge and Reasoning accuracies) and ``<category>/<dimension>``."""
    m = _meta(row.get("metadata"))
    out = []
    for category, key in (("knowledge", "music_knowledge"), ("reasoning", "music_reasoning")):
        dims = _as_list(m.get(key))
        out += [category] * bool(dims) + [f"{category}/{d}" for d in dims]
    return out


#: breakdown name → the values of one per-item row
BREAKDOWNS: dict[str, Callable[[dict], list[str]]] = {
    "category": lambda r: _as_list(r.get("category")),
    "secondary_category": lambda r: _as_list(_meta(r.get("metadata")).get("secondary_categories")),
    "difficulty": lambda r: _as_list(r.get("difficulty")),
    "dimension": _dimension,
    "genre": lambda r: _as_list(_meta(r.get("metadata")).get("genre")),
}


def breakdown_values(df: pd.DataFrame, name: str) -> list[list[str]]:
    """The values of breakdown ``name`` for each row of ``df`` (in order)."""
    fn = BREAKDOWNS[name]
    return [fn(r) for r in df.to_dict("records")]


def _same_partition(values: list[list[str]], task: pd.Series) -> bool:
    if any(len(v) != 1 for v in values):
        return False
    pairs = set(zip((v[0] for v in values), task.astype(str)))
    return len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})


def breakdown_groups(df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """``("<breakdown>=<value>", rows)`` for every breakdown value, in breakdown then sorted value order."""
    out: list[tuple[str, pd.DataFrame]] = []
    if df.empty:
        return out
    task = df["task"] if "task" in df.columns else pd.Series([""] * len(df), index=df.index)
    for name in BREAKDOWNS:
        values = breakdown_values(df, name)
        distinct = sorted({x for v in values for x in v})
        if not distinct:
            continue
        if len(distinct) == 1 and all(values):
            continue  # one value on every row: the same as "all"
        if _same_partition(values, task):
            continue
        for value in distinct:
            mask = np.array([value in v for v in values])
            out.append((f"{name}={value}", df[mask]))
    return out


def chosen_type(options: Any, parsed_index: Any, metadata: Any) -> str | None:
    """The type of the option a response chose ("none" = unanswered); None if the item has no types."""
    by_type = _meta(metadata).get("options_by_type")
    if not isinstance(by_type, dict) or not by_type:
        return None
    p = -1 if parsed_index is None or parsed_index != parsed_index else int(parsed_index)
    opts = list(options) if options is not None else []
    if not 0 <= p < len(opts):
        return "none"
    text = opts[p]
    return next((t for t, o in by_type.items() if o == text), "none")


def chosen_type_rows(df: pd.DataFrame, *, resamples: int, confidence: float, seed: int,
                     group_keys: tuple[str, ...] = tuple(KEYS)) -> list[dict[str, Any]]:
    """Long-form ``chosen_share`` rows per group of ``group_keys`` and option type (see module docstring)."""
    if df.empty or "metadata" not in df.columns:
        return []
    types = [chosen_type(o, p, m) for o, p, m in zip(df["options"], df["parsed_index"], df["metadata"])]
    work = df.assign(_type=types)
    work = work[work["_type"].notna()]
    if work.empty:
        return []
    known = {t for m in work["metadata"] for t in _meta(m).get("options_by_type", {})} | {"none"}
    order = ["correct", "IR", "CU", "IU"]
    seen = [t for t in order if t in known] + sorted(known - set(order) - {"none"}) + ["none"]
    rows: list[dict[str, Any]] = []
    keys = [k for k in group_keys if k in work.columns]
    for key, g in work.groupby(keys, sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        clip = g.groupby("item_id", sort=True)["clip_id"].first() if "clip_id" in g.columns else None
        for t in seen:
            per_q = (g["_type"] == t).astype(float).groupby(g["item_id"], sort=True).mean()
            e = estimate(per_q.to_numpy()[:, None], mean_of(), resamples=resamples, confidence=confidence,
                         seed=derive_seed("bootstrap-chosen", seed, *key, t),
                         clusters=None if clip is None else clip.reindex(per_q.index).to_numpy(dtype=object))
            rows.append({**dict(zip(keys, key)), "group": f"chosen={t}", "kind": "value", "metric": CHOSEN_METRIC,
                         "value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n,
                         "ci_unit": e.unit, "clusters": e.clusters, "definition": CHOSEN_DEFINITION})
    return rows
