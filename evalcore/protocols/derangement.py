"""Seeded random derangements: the random-audio condition pairs each clip with another clip."""

from __future__ import annotations

from typing import Sequence, TypeVar

import numpy as np

from evalcore.core.seeding import rng

T = TypeVar("T")

_MAX_TRIES = 1000  # P(a uniform permutation is a derangement) → 1/e, so this never runs out


def derangement(n: int, seed: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` with no fixed point.

    Rejection sampling of uniform permutations (expected e ≈ 2.7 draws). Raises
    ``ValueError`` for n < 2, where no derangement exists.
    """
    if n < 2:
        raise ValueError(f"no derangement of {n} element(s): need at least 2 distinct audio files")
    gen = rng("derangement", seed, n)
    idx = np.arange(n)
    for _ in range(_MAX_TRIES):
        perm = gen.permutation(n)
        if not np.any(perm == idx):
            return perm
    raise RuntimeError("derangement sampling did not converge")  # pragma: no cover


def derange(keys: Sequence[T], seed: int) -> dict[T, T]:
    """Map each distinct key to a different key; the pairing depends only on the sorted keys and seed."""
    distinct = sorted(set(keys))
    perm = derangement(len(distinct), seed)
    return {k: distinct[int(j)] for k, j in zip(distinct, perm)}
