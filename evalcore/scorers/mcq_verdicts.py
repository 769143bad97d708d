"""Two verdicts of a multiple-choice response whose judge follows a published rule: the published one by default,
evalcore's strict reading beside it.

A judge of a benchmark's released scorer (``mcq_mmau``, ``mcq_mmar``, ``mcq_mmau_pro``, ``mcq_rul``,
``mcq_muchomusic``: :class:`~evalcore.core.schema.PublishedRule`) says of each response which options the released
scorer credits (``credited``) and which one option evalcore's strict reading names (``parsed_index``, never a
guess). Which rule a row's judge follows is read from its ``judge`` column by a lookup the caller passes
(:data:`Rules`; the scoring stage passes the judges' registry's, :func:`evalcore.judges.base.published_rule`: this
package imports no judge). Per request (:func:`verdict`):

* ``correct`` — the **published** verdict: the answer is among the credited options (what the released scorer
  prints for that response, its quirks included): the default figure, ``accuracy``;
* ``correct_strict`` — the strict verdict: the one option named is the answer: ``accuracy_strict``.

A judge of evalcore's own rule (``mcq_string``, an LLM matcher) credits nothing apart from what it names: its rows
get ``correct`` alone, and its protocol no strict figure. Per cell and group, ``verdicts_differ`` counts the items
whose two verdicts differ in at least one option order (:func:`differ_rows`), and its definition ends with the
rule's quirks (:data:`evalcore.core.schema.QUIRKS`), which the report names ("17 of 136 items credited by …").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np
import pandas as pd

from evalcore.core.schema import QUIRKS, STRICT, VERDICTS_DIFFER, PublishedRule, strict_name
from evalcore.stats.aggregate import Aggregate

__all__ = ["STRICT_COLUMN", "Rules", "no_rules", "verdict", "rule_of", "has_strict", "strict_of",
           "published_aggregates", "differ_rows"]

#: the per-item column of the strict verdict (the published one is ``correct``)
STRICT_COLUMN = "correct" + STRICT
_UNKNOWN = PublishedRule(source="the judge's published rule", quirks="the published rule's quirks")
#: the published rule of the judge a judged row names (its ``judge`` column, ``name@version``); None for a judge of
#: evalcore's own rule or an unknown one
Rules = Callable[[str | None], PublishedRule | None]


def no_rules(label: str | None) -> PublishedRule | None:
    """A lookup that knows no judge's rule (rows with strict verdicts then name a generic one)."""
    return None


def verdict(parsed: Any, credited: Any, correct_index: Any) -> dict[str, float]:
    """``correct`` (the published verdict where ``credited`` is given, else the one option named) and, under a
    published rule, ``correct_strict``."""
    parsed = -1 if parsed is None or parsed != parsed else int(parsed)
    strict = float(parsed >= 0 and parsed == correct_index)
    if credited is None:
        return {"correct": strict}
    return {"correct": float(correct_index is not None and int(correct_index) in {int(i) for i in credited}),
            STRICT_COLUMN: strict}


def has_strict(df: pd.DataFrame) -> bool:
    """The rows carry strict verdicts (their judge follows a published rule)."""
    return STRICT_COLUMN in df.columns and bool(df[STRICT_COLUMN].notna().any())


def strict_of(df: pd.DataFrame) -> pd.Series:
    """Each row's strict verdict; a row judged before the published verdict was added (no ``credited``: a judge
    version 1 in a resumed run) has one verdict, its ``correct``, which is the strict reading."""
    return df[STRICT_COLUMN].fillna(df["correct"]) if STRICT_COLUMN in df.columns else df["correct"]


def rule_of(df: pd.DataFrame, rules: Rules) -> PublishedRule:
    """The published rule the rows' judge follows (their ``judge`` column read by ``rules``; a generic one if
    unknown)."""
    labels = df["judge"].dropna() if "judge" in df.columns else pd.Series([], dtype=object)
    return next((r for r in map(rules, pd.unique(labels.astype(str))) if r is not None), _UNKNOWN)


def published_aggregates(aggregates: tuple[Aggregate, ...], rule: PublishedRule) -> tuple[Aggregate, ...]:
    """``aggregates`` for a published rule's rows: each accuracy (the mean of ``correct``) names the rule, and
    its strict twin (the mean of ``correct_strict``) follows it; the other figures say they read the strict
    reading (the one option named)."""
    out: list[Aggregate] = []
    for a in aggregates:
        if a.columns == ("correct",):
            out.append(replace(a, definition=f"by the published rule ({rule.source}), its quirks included: "
                                             + a.definition + f"; evalcore's strict reading beside it: "
                                             f"{strict_name(a.name)}"))
            out.append(Aggregate(strict_name(a.name), (STRICT_COLUMN,), a.fn,
                                 f"by evalcore's strict reading of {rule.source} (the one option named, never "
                                 f"guessed: {rule.strict or 'no departure from the published verdict'}): "
                                 + a.definition))
        else:
            out.append(replace(a, definition=a.definition + " (by evalcore's strict reading: the one option named)"))
    return tuple(out)


def differ_rows(df: pd.DataFrame, rules: Rules, unit: str = "item_id") -> list[dict[str, Any]]:
    """The ``verdicts_differ`` row of one cell's rows (none without strict verdicts): items whose published and
    strict verdicts differ in at least one option order (value only, no CI); ``rules`` reads their judge's rule."""
    if not has_strict(df):
        return []
    rule = rule_of(df, rules)
    differs = df["correct"].to_numpy(dtype=float) != strict_of(df).to_numpy(dtype=float)
    n_items = int(df[unit].nunique())
    count = int(pd.Series(differs, index=df.index).groupby(df[unit], sort=False).any().sum())
    return [{"metric": VERDICTS_DIFFER, "value": float(count), "ci_low": np.nan, "ci_high": np.nan, "n": n_items,
             "definition": f"items of this cell whose verdict by the published rule ({rule.source}) differs from "
                           "evalcore's strict reading in at least one option order (a count, no CI)"
                           f"{QUIRKS}{rule.quirks}"}]
