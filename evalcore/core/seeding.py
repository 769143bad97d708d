"""Deterministic per-key seeds, so each random choice is reproducible and independent."""

from __future__ import annotations

import hashlib

import numpy as np


def derive_seed(*parts: object) -> int:
    """A 63-bit seed from any parts (stable across processes and Python versions)."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def rng(*parts: object) -> np.random.Generator:
    return np.random.default_rng(derive_seed(*parts))


def stable_id(*parts: object, length: int = 16) -> str:
    """A short hex id of the parts."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()[:length]
