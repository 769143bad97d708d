"""Seeded percentile bootstrap over items or over clusters of items (clips), for one metric or a paired
difference.

Every aggregate metric is written as ``fn(mean over items of per-item statistics)``
(micro F1 from mean TP/FP/FN, accuracy from mean correctness, ...), so a resample is a
reweighting of items and the paired difference reuses the same resamples for both sides.

When several items share one clip (MuChoMusic asks several questions of one track), their outcomes are not
independent and resampling items gives too narrow an interval. ``clusters`` (one label per item) then makes
the resampled unit the cluster: a resample draws clusters with replacement and takes every item of each drawn
cluster, and the statistic is the mean over the items drawn (a cluster bootstrap; Davison & Hinkley 1997,
§3.8). Paired differences draw the same clusters for both sides. With one item per cluster this is the item
bootstrap, draw for draw (the same intervals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

Aggregator = Callable[[np.ndarray], np.ndarray]  # (..., k) item-means → (...) metric values

_BLOCK_CELLS = 4_000_000  # resample indices held at once (bounds memory for large n)

#: the ``ci_unit`` of an interval that resampled items / clips
ITEM, CLIP = "item", "clip"


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    n: int
    #: what the bootstrap resampled (:data:`ITEM` or :data:`CLIP`) and how many of them there were
    unit: str = ITEM
    clusters: int | None = None


def _groups(clusters: Sequence | np.ndarray | None, n: int) -> tuple[np.ndarray, int] | None:
    """Per item, the index of its cluster in order of first appearance, and the number of clusters; None when
    no labels are given. A missing label (None / NaN) makes the item a cluster of its own."""
    if clusters is None:
        return None
    labels = np.asarray(clusters, dtype=object)
    if labels.shape != (n,):
        raise ValueError(f"cluster labels: {labels.shape} for {n} items")
    codes, uniques = pd.factorize(labels, sort=False)  # first-appearance order; a missing label → -1
    codes = codes.astype(np.int64)
    own = codes < 0
    codes[own] = len(uniques) + np.arange(int(own.sum()))
    return codes, len(uniques) + int(own.sum())


def _resampled_means(stats: list[np.ndarray], resamples: int, seed: int,
                     groups: tuple[np.ndarray, int] | None = None) -> list[np.ndarray]:
    """For each (n, k) array, the (resamples, k) means over the same bootstrap resamples of rows, or (with
    ``groups``) of clusters of rows: the mean over every row of the drawn clusters."""
    if groups is None:
        units, sizes = stats, None
    else:
        codes, c = groups
        units = [np.stack([np.bincount(codes, weights=s[:, j], minlength=c) for j in range(s.shape[1])], axis=1)
                 if s.shape[1] else np.zeros((c, 0)) for s in stats]  # per-cluster sums, clusters in first order
        sizes = np.bincount(codes, minlength=c).astype(np.float64)
    n = units[0].shape[0]
    gen = np.random.default_rng(seed)
    block = max(1, _BLOCK_CELLS // max(n, 1))
    outs: list[list[np.ndarray]] = [[] for _ in stats]
    done = 0
    while done < resamples:
        b = min(block, resamples - done)
        idx = gen.integers(0, n, size=(b, n))
        if sizes is None:
            for out, s in zip(outs, units):
                out.append(s[idx].mean(axis=1))
        else:
            drawn = sizes[idx].sum(axis=1)[:, None]
            for out, s in zip(outs, units):
                out.append(s[idx].sum(axis=1) / drawn)
        done += b
    return [np.concatenate(o, axis=0) for o in outs]


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def _unit(groups: tuple[np.ndarray, int] | None, n: int) -> tuple[str, int]:
    """(ci_unit, clusters): ``clip`` only when some items share a cluster (else resampling clips is
    resampling items)."""
    if groups is None or groups[1] == n:
        return ITEM, n
    return CLIP, groups[1]


def estimate(stats: np.ndarray, fn: Aggregator, *, resamples: int, confidence: float, seed: int,
             clusters: Sequence | np.ndarray | None = None) -> Estimate:
    """Point value and percentile CI of ``fn`` over items (rows of ``stats``); ``clusters`` (a label per row,
    e.g. its clip) resamples clusters of rows instead of rows."""
    stats = np.asarray(stats, dtype=np.float64)
    n = stats.shape[0]
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, ITEM, 0)
    groups = _groups(clusters, n)
    value = float(fn(stats.mean(axis=0)))
    (means,) = _resampled_means([stats], resamples, seed, groups)
    lo, hi = _interval(fn(means), confidence)
    return Estimate(value, lo, hi, n, *_unit(groups, n))


def paired_difference(a: np.ndarray, b: np.ndarray, fn: Aggregator, *, resamples: int, confidence: float,
                      seed: int, clusters: Sequence | np.ndarray | None = None) -> Estimate:
    """``fn(a) − fn(b)`` for the same items (row i of ``a`` and ``b`` is one item), with a paired CI; with
    ``clusters`` both sides draw the same clusters."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired statistics differ in shape: {a.shape} vs {b.shape}")
    n = a.shape[0]
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, ITEM, 0)
    groups = _groups(clusters, n)
    value = float(fn(a.mean(axis=0)) - fn(b.mean(axis=0)))
    ma, mb = _resampled_means([a, b], resamples, seed, groups)
    lo, hi = _interval(fn(ma) - fn(mb), confidence)
    return Estimate(value, lo, hi, n, *_unit(groups, n))
