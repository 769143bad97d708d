"""Seeded percentile bootstrap over items, for one metric or a paired difference.

Every aggregate metric is written as ``fn(mean over items of per-item statistics)``
(micro F1 from mean TP/FP/FN, accuracy from mean correctness, ...), so a resample is a
reweighting of items and the paired difference reuses the same resamples for both sides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

Aggregator = Callable[[np.ndarray], np.ndarray]  # (..., k) item-means → (...) metric values

_BLOCK_CELLS = 4_000_000  # resample indices held at once (bounds memory for large n)


@dataclass(frozen=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    n: int


def _resampled_means(stats: list[np.ndarray], resamples: int, seed: int) -> list[np.ndarray]:
    """For each (n, k) array, the (resamples, k) means over the same bootstrap resamples of rows."""
    n = stats[0].shape[0]
    gen = np.random.default_rng(seed)
    block = max(1, _BLOCK_CELLS // max(n, 1))
    outs: list[list[np.ndarray]] = [[] for _ in stats]
    done = 0
    while done < resamples:
        b = min(block, resamples - done)
        idx = gen.integers(0, n, size=(b, n))
        for out, s in zip(outs, stats):
            out.append(s[idx].mean(axis=1))
        done += b
    return [np.concatenate(o, axis=0) for o in outs]


def _interval(samples: np.ndarray, confidence: float) -> tuple[float, float]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return float("nan"), float("nan")
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def estimate(stats: np.ndarray, fn: Aggregator, *, resamples: int, confidence: float, seed: int) -> Estimate:
    """Point value and percentile CI of ``fn`` over items (rows of ``stats``)."""
    stats = np.asarray(stats, dtype=np.float64)
    n = stats.shape[0]
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    value = float(fn(stats.mean(axis=0)))
    (means,) = _resampled_means([stats], resamples, seed)
    lo, hi = _interval(fn(means), confidence)
    return Estimate(value, lo, hi, n)


def paired_difference(a: np.ndarray, b: np.ndarray, fn: Aggregator, *, resamples: int, confidence: float,
                      seed: int) -> Estimate:
    """``fn(a) − fn(b)`` for the same items (row i of ``a`` and ``b`` is one item), with a paired CI."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired statistics differ in shape: {a.shape} vs {b.shape}")
    n = a.shape[0]
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    value = float(fn(a.mean(axis=0)) - fn(b.mean(axis=0)))
    ma, mb = _resampled_means([a, b], resamples, seed)
    lo, hi = _interval(fn(ma) - fn(mb), confidence)
    return Estimate(value, lo, hi, n)
