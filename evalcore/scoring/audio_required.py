"""Which items need the audio? The items a run's no-audio answers get right, and every model's score without them.

An item of a benchmark (protocol instance × dataset) whose answers are right or wrong (a kind with options: multiple
choice, binary choice, true/false) is **answerable without audio** when any answer given without hearing it is
right: an answer under a condition that gives no audio and no description of it (``text_only``), or any answer of a
model that reads no audio (the text prior, a text LLM) under a condition that gives no description — across option
orders and prompt variants. The other items are **audio-required** (a RUListening-style subset of any benchmark).

:func:`marks` gives one row per item: whether it is answerable without audio and which answers were right
(``tables/answerable_without_audio.parquet``; ``evalcore subset`` writes the audio-required items in the benchmark's
own format). :func:`summary_rows` gives every model's figures with the correct audio over the audio-required items
only (group ``audio_required``, as the summary's rows, with bootstrap CIs) and, per benchmark, the share of items
removed (metric ``answerable_without_audio``) — ``tables/audio_required.parquet``.
"""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from evalcore.conditions.base import known
from evalcore.kinds.base import kind_of
from evalcore.scoring.requests import ScorerParams
from evalcore.scoring.summary import summary_table

GROUP = "audio_required"
SHARE = "answerable_without_audio"
MARK_COLUMNS = ["protocol", "dataset", "item_id", SHARE, "right_without_audio", "asked_without_audio"]


def _silent(written: Any) -> bool:
    """A condition under which the model hears nothing of the clip and reads no description of it."""
    c = known(written)
    return c is not None and not c.hears and not c.described


def _undescribed(written: Any) -> bool:
    c = known(written)
    return c is not None and not c.described


def _right_or_wrong(kind: Any) -> str | None:
    """The per-item column saying right (1) or wrong (0) for a kind whose answers are one or the other (None: not
    such a kind, e.g. free-form similarity or factual F1)."""
    spec = kind_of(str(kind))
    return spec.score_column if spec is not None and spec.options is not None else None


def marks(per_item: pd.DataFrame, deaf_models: Iterable[str] = ()) -> pd.DataFrame:
    """One row per scored item of each right-or-wrong benchmark answered without audio (an item no such answer
    reached, e.g. one whose text-only request errored, is not answerable without audio): ``protocol``,
    ``dataset``, ``item_id``, ``answerable_without_audio``, ``right_without_audio`` (the ``model/condition`` answers
    that got it right) and ``asked_without_audio`` (how many answers without audio it had)."""
    deaf = set(deaf_models)
    if per_item.empty:
        return pd.DataFrame(columns=MARK_COLUMNS)
    rows: list[dict[str, Any]] = []
    for (proto, kind), g in per_item.groupby(["protocol", "protocol_kind"], sort=True):
        column = _right_or_wrong(kind)
        if column is None or column not in g.columns:
            continue
        conds = g["condition"].astype(str)
        blind = g[conds.map(_silent).astype(bool) | (g["model"].isin(deaf) & conds.map(_undescribed).astype(bool))]
        blind = blind[blind[column].notna()]
        for ds in sorted(set(blind["dataset"])):  # a benchmark asked without audio: every item of it is marked
            asked = {item: h for item, h in blind[blind["dataset"] == ds].groupby("item_id", sort=True)}
            for item in sorted(set(g.loc[g["dataset"] == ds, "item_id"])):
                h = asked.get(item, blind.iloc[0:0])
                right = h[h[column] >= 1.0]
                rows.append({"protocol": proto, "dataset": ds, "item_id": item, SHARE: bool(len(right)),
                             "right_without_audio": sorted({f"{r.model}/{r.condition}" for r in right.itertuples()}),
                             "asked_without_audio": int(len(h))})
    return pd.DataFrame(rows, columns=MARK_COLUMNS)


def summary_rows(per_item: pd.DataFrame, marked: pd.DataFrame, resamples: int, confidence: float, seed: int,
                 params: ScorerParams | None = None) -> pd.DataFrame:
    """The summary's rows (group ``all``, condition ``correct``) over each marked benchmark's audio-required items,
    as group ``audio_required``, and per benchmark the share of its items answerable without audio (``n``: items
    marked)."""
    if marked.empty:
        return pd.DataFrame()
    key = ["protocol", "dataset", "item_id"]
    benches = marked[["protocol", "dataset"]].drop_duplicates()
    rows = per_item.merge(benches, on=["protocol", "dataset"])
    keep = rows[rows["condition"] == "correct"].merge(marked[~marked[SHARE]][key], on=key)
    out = (summary_table(keep, resamples, confidence, seed, params, breakdowns=False).to_pandas() if len(keep)
           else pd.DataFrame())
    if len(out):
        out = out[out["group"] == "all"].assign(group=GROUP)
    shares = []
    for (proto, ds), g in marked.groupby(["protocol", "dataset"], sort=True):
        kind = rows.loc[(rows["protocol"] == proto) & (rows["dataset"] == ds), "protocol_kind"].iloc[0]
        shares.append({"protocol": proto, "protocol_kind": kind, "dataset": ds, "model": "", "condition": "",
                       "variant": "", "group": GROUP, "kind": "value", "metric": SHARE,
                       "value": float(g[SHARE].mean()), "n": int(len(g)),
                       "definition": "share of the benchmark's items that some answer without audio got right "
                                     "(text_only, or a model that reads no audio, over every option order and "
                                     "variant); the group's figures leave them out"})
    return pd.concat([out, pd.DataFrame(shares)], ignore_index=True)
