"""Aggregates of per-item metric frames with bootstrap confidence intervals, and paired differences between
conditions (or systems) over the units both scored.

Where the rows carry the item's clip (``clip_id``, :data:`evalcore.core.schema.SCORE_KEY`) and some items of a cell
share one, the bootstrap resamples clips (every question of a clip together; both sides of a paired difference
draw the same clips). Each row names its resampled unit (``ci_unit``: ``item``, ``clip``, or the unit a scorer's
``item_stats`` indexes by, e.g. ``recording``) and how many there were (``clusters``). A paired difference of
accuracy whose per-item outcomes are 0/1 on both sides also gets McNemar's exact p-value (``test`` =
``mcnemar_exact``); other paired differences name ``paired_bootstrap`` (their CI is the test, no p-value).

An aggregate is declared as an :class:`Aggregate` (a name, the per-item columns it reads, ``fn`` of their item
means, a definition): the scorers of the protocol kinds (:class:`~evalcore.kinds.scorer.Scorer`) and CMI-Bench's
rules (:mod:`evalcore.mir_rules.rules`) declare theirs with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from evalcore.core.schema import STRICT
from evalcore.core.seeding import derive_seed
from evalcore.stats.bootstrap import Aggregator, Estimate, estimate, paired_difference
from evalcore.stats.mcnemar import MCNEMAR, is_binary, mcnemar


@dataclass(frozen=True)
class Aggregate:
    """An aggregate metric = ``fn`` of the item means of ``columns``; ``definition`` goes into the tables."""

    name: str
    columns: tuple[str, ...]
    fn: Aggregator
    definition: str


def mean_of(col: int = 0) -> Aggregator:
    return lambda m: m[..., col]


def safe_ratio(num: np.ndarray, den: np.ndarray, empty: float) -> np.ndarray:
    """num / den, with ``empty`` where den == 0."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.full(np.broadcast(num, den).shape, empty, dtype=float)
    np.divide(num, den, out=out, where=den != 0)
    return out


def mean_item_stats(df: pd.DataFrame, columns: list[str], unit: str = "item_id") -> pd.DataFrame:
    """The mean of each column over a unit's rows (e.g. an item's option orders), indexed by unit, sorted."""
    return df.groupby(unit, sort=True)[columns].mean()


ItemStats = Callable[[pd.DataFrame, list[str], str], pd.DataFrame]

#: the per-item column naming an item's clip (the first item of its dataset playing the same audio file)
CLIP_COLUMN = "clip_id"
#: the ``test`` of a paired difference judged by its bootstrap CI alone
PAIRED_BOOTSTRAP = "paired_bootstrap"


def _clusters(g: pd.DataFrame, stats: pd.DataFrame, unit: str) -> np.ndarray | None:
    """Each unit's clip, aligned with the rows of ``stats`` (None: no clips known, or ``stats`` already
    resamples a coarser unit of its own)."""
    if CLIP_COLUMN not in g.columns or stats.index.name != unit:
        return None
    clip = g.groupby(unit, sort=True)[CLIP_COLUMN].first()  # a null clip: the item is a cluster of its own
    return clip.reindex(stats.index).to_numpy(dtype=object)


def _unit_of(e: Estimate, stats: pd.DataFrame, unit: str) -> dict[str, Any]:
    """``ci_unit`` and ``clusters`` of an estimate over ``stats``."""
    if stats.index.name not in (None, unit):  # the scorer's own unit, e.g. "_recording"
        return {"ci_unit": str(stats.index.name).lstrip("_"), "clusters": e.clusters}
    return {"ci_unit": e.unit, "clusters": e.clusters}


def is_accuracy(name: str, columns: tuple[str, ...]) -> bool:
    """The aggregate is an accuracy: the mean of the per-item 0/1 ``correct`` column (or of its strict twin,
    ``correct_strict``, under a published rule)."""
    return columns in (("correct",), ("correct" + STRICT,)) and name.startswith("accuracy")


def _keyed(key: tuple, names: list[str]) -> dict[str, Any]:
    return dict(zip(names, key if isinstance(key, tuple) else (key,)))


def cells(df: pd.DataFrame, by: list[str]) -> Iterator[tuple[tuple, pd.DataFrame]]:
    """``(key, rows)`` per group of ``by``, in the order and with the rows (in their order) that
    ``df.groupby(by, sort=True, dropna=False)`` yields, one group's rows copied at a time: pandas' own iteration
    first copies the whole frame sorted by group (at a million per-item rows, a second copy of them)."""
    gb = df.groupby(by, sort=True, dropna=False)
    ids = gb.ngroup().to_numpy()
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(gb.ngroups + 1))
    for i, key in enumerate(gb.size().index):
        yield (key if isinstance(key, tuple) else (key,)), df.take(order[bounds[i]:bounds[i + 1]])


def _columns(aggregates: Iterable[Aggregate]) -> list[str]:
    """Every column the aggregates read, once each (per-unit statistics are computed once for all of them)."""
    return list(dict.fromkeys(c for agg in aggregates for c in agg.columns))


def aggregate(df: pd.DataFrame, aggregates: Iterable[Aggregate], by: list[str], *, unit: str = "item_id",
              resamples: int, confidence: float, seed: int, item_stats: ItemStats = mean_item_stats) -> list[dict]:
    """Long-form rows: each aggregate of each group of ``by``, with a bootstrap CI over units
    (per-unit statistics from ``item_stats``)."""
    aggregates = list(aggregates)
    out = []
    for key, g in cells(df, by):
        stats = item_stats(g, _columns(aggregates), unit)
        clusters = _clusters(g, stats, unit)
        for agg in aggregates:
            e = estimate(stats[list(agg.columns)].to_numpy(), agg.fn, resamples=resamples,
                         confidence=confidence, seed=derive_seed("bootstrap", seed, *_flat(key), agg.name),
                         clusters=clusters)
            out.append({**_keyed(key, by), "kind": "value", "metric": agg.name, **_estimate(e),
                        **_unit_of(e, stats, unit), "definition": agg.definition})
    return out


def contrasts(df: pd.DataFrame, aggregates: Iterable[Aggregate], by: list[str], *, column: str = "condition",
              reference: str = "correct", unit: str = "item_id", resamples: int, confidence: float,
              seed: int, item_stats: ItemStats = mean_item_stats) -> list[dict]:
    """Paired differences reference − other value of ``column`` within each group of ``by``, over shared units."""
    aggregates = list(aggregates)
    out = []
    for key, g in cells(df, by):
        sides = dict(iter(g.groupby(column, sort=True)))
        if reference not in sides:
            continue
        stats = {side: item_stats(sdf, _columns(aggregates), unit) for side, sdf in sides.items()}
        clip_of = (g.groupby(unit, sort=True)[CLIP_COLUMN].first() if CLIP_COLUMN in g.columns
                   and stats[reference].index.name == unit else None)
        for agg in aggregates:
            cols = list(agg.columns)
            ref = stats[reference][cols]
            for other in sides:
                if other == reference:
                    continue
                st = stats[other][cols]
                common = ref.index.intersection(st.index)
                x, y = ref.loc[common].to_numpy(), st.loc[common].to_numpy()
                e = paired_difference(x, y, agg.fn, resamples=resamples, confidence=confidence,
                                      seed=derive_seed("bootstrap-diff", seed, *_flat(key), agg.name, other),
                                      clusters=None if clip_of is None else clip_of.reindex(common).to_numpy(
                                          dtype=object))
                out.append({**_keyed(key, by), column: f"{reference}-{other}", "kind": "paired_diff",
                            "metric": agg.name, **_estimate(e), **_unit_of(e, ref, unit), **_test(agg, x, y),
                            "definition": f"paired difference {reference} − {other} over items scored in both; "
                                          + agg.definition})
    return out


def _test(agg: Aggregate, x: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """``test`` and ``p_value`` of a paired difference: McNemar's exact test for an accuracy whose per-item
    outcomes are 0/1 on both sides (one option order, or orders that agree), else its bootstrap CI alone."""
    if len(x) and is_accuracy(agg.name, tuple(agg.columns)) and is_binary(x, y):
        return {"test": MCNEMAR, "p_value": mcnemar(x, y).p_value}
    return {"test": PAIRED_BOOTSTRAP, "p_value": float("nan")}


def _flat(key: Any) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _estimate(e: Any) -> dict[str, Any]:
    return {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n}
