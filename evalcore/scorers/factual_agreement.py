"""Agreement of two label extractors on the same responses (e.g. the LLM extractor vs the lexicon).

Per response: exact set match, Jaccard (two empty sets agree with Jaccard 1) and the TP/FP/FN of
the first extractor's labels against the second's (the second is the reference). Over responses:
share of exact matches, mean Jaccard and micro P/R/F1 (pooled counts; undefined — NaN — when neither
extractor found any label). Used by ``evalcore score factual --agreement`` and by a pipeline run
whose protocol configures an ``agreement_judge``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from evalcore.stats.aggregate import Aggregate, mean_of, safe_ratio

__all__ = ["compare", "summarize", "AGGREGATES"]


def compare(first: Sequence[str], second: Sequence[str]) -> dict[str, float]:
    """exact, jaccard, tp, fp, fn of ``first`` against ``second`` (the reference)."""
    a, b = set(first), set(second)
    union = a | b
    return {"exact": float(a == b), "jaccard": len(a & b) / len(union) if union else 1.0,
            "tp": float(len(a & b)), "fp": float(len(a - b)), "fn": float(len(b - a))}


def summarize(pairs: Iterable[tuple[Sequence[str], Sequence[str]]]) -> dict[str, float]:
    """n, exact (share), jaccard (mean), micro precision/recall/f1 of first vs second over ``pairs``."""
    rows = [compare(a, b) for a, b in pairs]
    n = len(rows)
    tp, fp, fn = (sum(r[k] for r in rows) for k in ("tp", "fp", "fn"))
    nan = float("nan")
    return {"n": n, "exact": float(np.mean([r["exact"] for r in rows])) if n else nan,
            "jaccard": float(np.mean([r["jaccard"] for r in rows])) if n else nan,
            "precision": tp / (tp + fp) if tp + fp else nan, "recall": tp / (tp + fn) if tp + fn else nan,
            "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else nan}


def _f1(m: np.ndarray) -> np.ndarray:
    tp, fp, fn = m[..., 0], m[..., 1], m[..., 2]
    return safe_ratio(2 * tp, 2 * tp + fp + fn, np.nan)


#: summary aggregates over the per-response columns of :func:`compare`
AGGREGATES = (
    Aggregate("agreement_exact", ("exact",), mean_of(),
              "share of responses where the two extractors give the same label set"),
    Aggregate("agreement_jaccard", ("jaccard",), mean_of(),
              "mean Jaccard of the two extractors' label sets (both empty = 1)"),
    Aggregate("agreement_f1", ("tp", "fp", "fn"), _f1,
              "micro F1 of the judge's labels against the agreement judge's labels (pooled counts)"),
)
