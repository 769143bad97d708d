"""Aggregates of per-item metric frames with bootstrap confidence intervals, and paired differences between
conditions (or systems) over the units both scored."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from evalcore.metrics.base import Aggregate, mean_item_stats
from evalcore.metrics.bootstrap import estimate, paired_difference
from evalcore.seeding import derive_seed

ItemStats = Callable[[pd.DataFrame, list[str], str], pd.DataFrame]


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
        for agg in aggregates:
            e = estimate(stats[list(agg.columns)].to_numpy(), agg.fn, resamples=resamples,
                         confidence=confidence, seed=derive_seed("bootstrap", seed, *_flat(key), agg.name))
            out.append({**_keyed(key, by), "kind": "value", "metric": agg.name, **_estimate(e),
                        "definition": agg.definition})
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
        for agg in aggregates:
            cols = list(agg.columns)
            ref = stats[reference][cols]
            for other in sides:
                if other == reference:
                    continue
                st = stats[other][cols]
                common = ref.index.intersection(st.index)
                e = paired_difference(ref.loc[common].to_numpy(), st.loc[common].to_numpy(), agg.fn,
                                      resamples=resamples, confidence=confidence,
                                      seed=derive_seed("bootstrap-diff", seed, *_flat(key), agg.name, other))
                out.append({**_keyed(key, by), column: f"{reference}-{other}", "kind": "paired_diff",
                            "metric": agg.name, **_estimate(e),
                            "definition": f"paired difference {reference} − {other} over items scored in both; "
                                          + agg.definition})
    return out


def _flat(key: Any) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _estimate(e: Any) -> dict[str, Any]:
    return {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n}
