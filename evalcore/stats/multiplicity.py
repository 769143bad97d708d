"""Holm's step-down correction of a family of p-values (Holm 1979), the one correction evalcore uses: the
nightly's and ``evalcore compare``'s comparisons of a checkpoint, and the McNemar tests of a run's summary."""

from __future__ import annotations

import numpy as np

CORRECTION = "holm"


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted in the family)."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out
