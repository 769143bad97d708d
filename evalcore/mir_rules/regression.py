"""CMI-Bench's emotion-regression rule (``extract_int`` / ``cal_r2`` of the released ``evaluate.py``, commit 4c15f410):
EMO arousal and valence, scored by R² of the responses, normalised, against the (standardised) annotations.

The released number parser (:func:`rating`):

1. "out of 9" is deleted; then "1-9 scale", "from 1 to 9", "<digit>-point scale", "<d>/<d> time signature",
   "<d>/<d> beat" and "Example <digit>" are neutralised, so the scale's own numbers are not read.
2. Every run of digits is a number; only those strictly between 0 and 10 are kept (a BPM is not a rating).
3. None: unanswered. Exactly two, written ``a.b`` in the response: the rating a.b ("5.5"). Two equal: that one.
   Otherwise the first ("around 7 or 8" → 7; the released code prints a warning).

The released figure (:class:`RegressionRule`): with μ and σ the mean and **population** standard deviation of the
**answered** ratings of the file, each answered rating x becomes (x − μ)/σ and each unanswered one 0 (its rating is
taken to be μ); R² = 1 − Σ(t − p)² / Σ(t − t̄)² against the annotations t (torchmetrics ``R2Score``). The per-item
columns are the sums these need (answered, x, x², t, t², t·x, t for answered items), so the figure is a function of
item means and its bootstrap re-normalises each resample, as the rule would on that sample. All ratings equal
(σ = 0): the released code raises; the figure is then undefined (NaN), not guessed.

Precision: evalcore computes in float64. The released function rounds to float32 on the way: its normalised ratings
are NumPy float64 values (``a * x + b``, with ``a`` and ``b`` from ``np.mean`` / ``np.std``), so ``torch.tensor``
keeps them float64, but its annotations are Python floats, so their tensor has torch's default dtype, float32; and
torchmetrics' ``R2Score`` sums into float32 states (``torch.zeros``): Σt and Σt² in float32, the residual sum
computed in float64 (t − p is promoted) and then added into a float32 state, 1 − SS_res/SS_tot in float32. The two
agree to float32's precision (``tests/test_cmi_published.py``: 10⁻⁶), and to 10⁻⁹ when the released function runs
with torch's default dtype float64. Constant annotations (neither EMO file has them): ``R2Score`` gives 0 (1 where
the residuals vanish too), evalcore NaN.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np

from evalcore.datasets.cmi_bench import Family
from evalcore.mir_rules.rules import RULES, Rule, reference_of
from evalcore.stats.aggregate import Aggregate, mean_of, safe_ratio

__all__ = ["rating", "r2_of_means", "RegressionRule"]

_SCALE = ((re.compile(r"\d-point scale"), "scale"), (re.compile(r"\d/\d time signature"), "time signature"),
          (re.compile(r"\d/\d beat"), "time signature"), (re.compile(r"Example \d"), ""))
_DIGITS = re.compile(r"\d+")


def rating(response: str) -> float | None:
    """The rating the released parser reads in ``response`` (module docstring), or None."""
    s = re.sub(r"out of 9", "", response).replace("1-9 scale", "scale").replace("from 1 to 9", "scale")
    for pattern, repl in _SCALE:
        s = pattern.sub(repl, s)
    numbers = [n for n in _DIGITS.findall(s) if 0 < int(n) < 10]
    if not numbers:
        return None
    if len(numbers) == 2 and f"{numbers[0]}.{numbers[1]}" in s:
        return float(f"{numbers[0]}.{numbers[1]}")
    return float(int(numbers[0]))


_COLUMNS = ("answered", "x", "x2", "t", "t2", "tx", "ta")


def r2_of_means(m: np.ndarray) -> np.ndarray:
    """R² of the released rule from the item means of :data:`_COLUMNS` (NaN where σ = 0 or t is constant)."""
    a, x, x2, t, t2, tx, ta = (m[..., i] for i in range(len(_COLUMNS)))
    mu = safe_ratio(x, a, np.nan)
    var = safe_ratio(x2, a, np.nan) - mu ** 2
    sigma = np.sqrt(np.where(var > 0, var, np.nan))
    mean_tp = (tx - mu * ta) / sigma
    mean_p2 = (x2 - 2 * mu * x + mu ** 2 * a) / sigma ** 2
    ss_res = t2 - 2 * mean_tp + mean_p2
    ss_tot = t2 - t ** 2
    return 1.0 - safe_ratio(ss_res, ss_tot, np.nan)


@RULES.register(Family.REGRESSION)
class RegressionRule(Rule):
    """The released rating parse; R² after the released normalisation, as a function of item means."""

    columns = _COLUMNS
    aggregates = (
        Aggregate("r2", _COLUMNS, r2_of_means,
                  "CMI-Bench emotion R² (evaluate.py cal_r2 @ 4c15f410): 1 - SS_res/SS_tot of the released rating "
                  "parse, z-normalised by the mean and population SD of the answered ratings (unanswered = 0 after "
                  "normalisation), against the annotation; torchmetrics R2Score's formula, in float64"),
        Aggregate("answered", ("answered",), mean_of(), "share of responses holding a rating between 1 and 9"),
    )

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        x = rating(str(response))
        t = float(reference_of(reference))
        a = 0.0 if x is None else 1.0
        x = 0.0 if x is None else x
        return {"answered": a, "x": a * x, "x2": a * x * x, "t": t, "t2": t * t, "tx": t * a * x, "ta": t * a}
