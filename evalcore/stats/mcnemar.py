"""McNemar's exact test for paired correct / incorrect outcomes (two conditions or two systems, same items).

Of ``n`` items answered by both sides, only the discordant ones carry information: ``b`` right on the first side
and wrong on the second, ``c`` the other way round. Under the null hypothesis (equal accuracy) each discordant
item falls either way with probability ½, so ``b ~ Binomial(b + c, ½)``; the exact two-sided p-value is
``min(1, 2 · P(X ≤ min(b, c)))`` (McNemar 1947; the exact form as in Fagerland, Lydersen & Laake 2013), which
for this symmetric binomial equals SciPy's ``binomtest(b, b + c, 0.5)`` p-value. No discordant item: p = 1.

The test treats items as independent. Where several items share a clip the p-value is, like an item bootstrap,
too small; the clip bootstrap's interval beside it is the one that respects clips.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the ``test`` named in the tables for this test, and for rows whose outcomes are not 0/1 on both sides
MCNEMAR = "mcnemar_exact"
DEFINITION = ("McNemar's exact test: two-sided binomial test of b = items right only on the first side among "
              "b + c discordant items, p = min(1, 2·P(X ≤ min(b, c))), X ~ Bin(b + c, ½); items treated as "
              "independent")


@dataclass(frozen=True)
class McNemar:
    b: int  # right on the first side only
    c: int  # right on the second side only
    p_value: float


def is_binary(*outcomes: np.ndarray) -> bool:
    """Every value of every array is 0 or 1 (per-item outcomes McNemar can take)."""
    return all(np.isin(np.asarray(o, dtype=float), (0.0, 1.0)).all() for o in outcomes)


def exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of ``b`` and ``c`` discordant pairs."""
    from scipy.stats import binom

    n = int(b) + int(c)
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * binom.cdf(min(b, c), n, 0.5)))


def mcnemar(first: np.ndarray, second: np.ndarray) -> McNemar:
    """The test of paired 0/1 outcomes (row i of both is one item); ValueError when they are not 0/1."""
    x, y = np.asarray(first, dtype=float).ravel(), np.asarray(second, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired outcomes differ in shape: {x.shape} vs {y.shape}")
    if not is_binary(x, y):
        raise ValueError("McNemar's test needs 0/1 outcomes on both sides")
    b, c = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    return McNemar(b, c, exact_p(b, c))
