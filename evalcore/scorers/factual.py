"""Factual QA: precision / recall / F1 of extracted labels against ground-truth labels."""

from __future__ import annotations

from typing import Any

import numpy as np

from evalcore.kinds.scorer import Scorer

from evalcore.stats.aggregate import Aggregate, mean_of, safe_ratio


def set_scores(predicted: list[str], truth: list[str]) -> dict[str, float]:
    """TP/FP/FN and P/R/F1 of two label sets. Both empty counts as perfect (1.0); one empty as 0."""
    p, t = set(predicted), set(truth)
    tp, fp, fn = len(p & t), len(p - t), len(t - p)
    empty = 1.0 if not p and not t else 0.0
    prec = tp / (tp + fp) if tp + fp else empty
    rec = tp / (tp + fn) if tp + fn else empty
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0
    return {"tp": float(tp), "fp": float(fp), "fn": float(fn), "precision": prec, "recall": rec, "f1": f1}


def micro_prf(kind: str):
    """Micro precision / recall / F1 from mean TP/FP/FN (no prediction: precision 0; nothing at all: F1 1)."""
    def fn(m: np.ndarray) -> np.ndarray:
        tp, fp, fn_ = m[..., 0], m[..., 1], m[..., 2]
        if kind == "precision":
            return safe_ratio(tp, tp + fp, 0.0)
        if kind == "recall":
            return safe_ratio(tp, tp + fn_, 0.0)
        return safe_ratio(2 * tp, 2 * tp + fp + fn_, 1.0)

    return fn


class FactualScorer(Scorer):
    protocol = "factual"
    columns = ("tp", "fp", "fn", "precision", "recall", "f1")
    aggregates = (
        *(Aggregate(f"{k}_micro", ("tp", "fp", "fn"), micro_prf(k),
                    f"{k} over TP/FP/FN pooled across items (micro)") for k in ("precision", "recall", "f1")),
        *(Aggregate(f"{k}_macro", (k,), mean_of(), f"mean per-item {k} (macro); an empty prediction scores 0")
          for k in ("precision", "recall", "f1")),
    )

    with_errors = tuple(
        Aggregate(f"{k}_micro_with_errors", ("tp", "fp", "fn"), micro_prf(k),
                  f"{k} over TP/FP/FN pooled across items (micro), every errored request of the cell counted as "
                  "predicting no label (its true labels are misses)") for k in ("recall", "f1"))

    def error_fill(self, row: dict[str, Any]) -> dict[str, float]:
        """An errored request predicts no label: every true label is a miss."""
        return {"tp": 0.0, "fp": 0.0, "fn": float(len(set(row.get("labels") or [])))}

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        return [set_scores(r.get("extracted") or [], r.get("labels") or []) for r in rows]
