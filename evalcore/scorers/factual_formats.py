"""Scorers of the derived factual formats (paper App. B.2): true/false per label and binary choice.

**True/false** (protocol ``true_false``; items from
:func:`evalcore.datasets.factual_formats.true_false_items`, one per (recording, label), ground
truth ``["yes"]``/``["no"]``). Each chunk's answer (the ``true_false`` judge: yes, no or
unanswered) is aggregated over the chunks of the recording by **any** (yes if a chunk says yes)
and by **majority** (yes if more than half of the chunks that answered say yes; a tie is no),
see :func:`evalcore.scorers.factual_modes.aggregate_answers`. Per rule ``r``:

* ``accuracy_r`` — share of (recording, label) questions answered correctly, (TP + TN) / all
  questions: a true negative (no on an absent label) counts as right; an unanswered question counts
  as wrong. This is *not* the "Accuracy" row of the factual paper's Tables 8 and 9;
* ``precision_r``/``recall_r``/``f1_r`` — micro P/R/F1 of the labels answered "yes" against the
  true labels (pooled TP/FP/FN; unanswered = not predicted), i.e. the label-set scores of
  :func:`evalcore.scorers.factual_modes.true_false_labels`;
* ``jaccard_r`` — TP / (TP + FP + FN), pooled: the Jaccard index of the labels answered yes and the
  true labels, true negatives left out. It is the "Accuracy" row of Tables 8 and 9: from each
  column's own printed P and R, F1 / (2 − F1) (which equals TP / (TP + FP + FN)) gives the printed
  accuracy to within 0.007 in all twelve cells (``tests/test_true_false_jaccard.py``);
* ``answered_r`` — share of questions with an answer.

Bootstrap units are recordings (all labels of one recording resample together); the summary
also breaks the metrics down per asked label (``group = label=<label>``).

**Binary choice** (protocol ``binary_choice``; "Between A and B, …", one ground-truth label vs one
distractor), scored as the paper's Tables 7 and 13 report it: the labels an answer names are
extracted by the protocol's judge over the two presented options (the lexicon reader, or the LLM
extractor), united over chunks, and scored like every factual task against the ground-truth label:
``precision_micro`` / ``recall_micro`` / ``f1_micro`` over TP/FP/FN pooled across items. An answer
naming both options has recall 1 and precision 0.5, one naming neither recall 0 and no precision
term, so recall can exceed precision (it does in every column of the paper's tables); F1 is the
harmonic mean of the pooled P and R, as the published columns are. Kept beside them: the judge's
strict reading of the answer as one option (index, -1 = unanswered: both, neither or a hedge),
combined by majority over the chunks that answered (a tie is unanswered): ``accuracy`` (unanswered
= wrong, chance 0.5), ``answered`` and ``accuracy_answered``.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evalcore.kinds.scorer import Scorer

from evalcore.scorers.factual import micro_prf, set_scores
from evalcore.scorers.factual_modes import aggregate_answers, union_labels
from evalcore.stats.aggregate import Aggregate, mean_item_stats, mean_of, safe_ratio

__all__ = ["RULES", "chunk_answers", "combine_choices", "TrueFalseScorer", "BinaryChoiceScorer", "recording_id"]

RULES = ("any", "majority")
_TF_ID = re.compile(r":tf:.*$")


def recording_id(item_id: str) -> str:
    """The source recording of a true/false item id ``"<source>:tf:<label>"`` (else the id itself)."""
    return _TF_ID.sub("", str(item_id))


def _yes_no(extracted: Sequence[str] | None) -> bool | None:
    labels = set(extracted or ())
    if labels == {"yes"}:
        return True
    if labels == {"no"}:
        return False
    return None


def chunk_answers(row: dict[str, Any]) -> list[bool | None]:
    """Per-chunk yes/no answers of a merged true/false row (``chunk_extracted``, else ``extracted``)."""
    chunks = row.get("chunk_extracted")
    if chunks is None:
        chunks = [row.get("extracted")]
    return [_yes_no(c) for c in chunks]


def combine_choices(choices: Sequence[int | None]) -> int:
    """One option index from per-chunk choices: the majority of answered chunks; -1 on a tie or none."""
    votes: dict[int, int] = {}
    for c in choices:
        if c is not None and c >= 0:
            votes[int(c)] = votes.get(int(c), 0) + 1
    if not votes:
        return -1
    best = max(votes.values())
    winners = [c for c, n in votes.items() if n == best]
    return winners[0] if len(winners) == 1 else -1


def _micro(kind: str):
    """Micro P/R/F1 or Jaccard index from mean TP/FP/FN; undefined (NaN) when its denominator is 0."""
    def fn(m: np.ndarray) -> np.ndarray:
        tp, fp, fn_ = m[..., 0], m[..., 1], m[..., 2]
        if kind == "precision":
            return safe_ratio(tp, tp + fp, np.nan)
        if kind == "recall":
            return safe_ratio(tp, tp + fn_, np.nan)
        if kind == "jaccard":
            return safe_ratio(tp, tp + fp + fn_, np.nan)
        return safe_ratio(2 * tp, 2 * tp + fp + fn_, np.nan)

    return fn


def _tf_aggregates(rule: str) -> tuple[Aggregate, ...]:
    counts = (f"tp_{rule}", f"fp_{rule}", f"fn_{rule}")
    how = f"chunks aggregated by '{rule}'"
    return (
        Aggregate(f"accuracy_{rule}", (f"correct_{rule}",), mean_of(),
                  f"share of (recording, label) true/false questions answered correctly, (TP + TN) / questions "
                  f"(a no on an absent label counts as right), {how}; unanswered = wrong; not the factual paper's "
                  f"Tables 8-9 'Accuracy' (that is jaccard_{rule})"),
        *(Aggregate(f"{k}_{rule}", counts, _micro(k),
                    f"micro {k} of the labels answered yes vs the true labels (pooled TP/FP/FN), {how}; "
                    "unanswered = not predicted") for k in ("precision", "recall", "f1")),
        Aggregate(f"jaccard_{rule}", counts, _micro("jaccard"),
                  f"Jaccard index TP / (TP + FP + FN) of the labels answered yes vs the true labels (pooled, true "
                  f"negatives left out; = F1 / (2 - F1)), {how}; unanswered = not predicted; the factual paper's "
                  "Tables 8-9 'Accuracy'"),
        Aggregate(f"answered_{rule}", (f"answered_{rule}",), mean_of(),
                  f"share of true/false questions with a yes/no answer, {how}"),
    )


class TrueFalseScorer(Scorer):
    """Per (recording, label) question: the any/majority answers and their TP/FP/FN/TN."""

    protocol = "true_false"
    columns = tuple(f"{c}_{r}" for r in RULES for c in ("answer", "correct", "answered", "tp", "fp", "fn", "tn"))
    aggregates = (*_tf_aggregates("any"), *_tf_aggregates("majority"))
    with_errors = tuple(
        Aggregate(f"accuracy_{rule}_with_errors", (f"correct_{rule}",), mean_of(),
                  f"accuracy_{rule} counting every errored request of the cell as a wrong answer") for rule in RULES)

    def error_fill(self, row: dict[str, Any]) -> dict[str, float]:
        """An errored request is a wrong answer."""
        return {f"correct_{rule}": 0.0 for rule in RULES}

    def breakdown_groups(self, df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
        """Per asked label (the item's category): summary groups ``label=<label>``."""
        labels = sorted(df["category"].dropna().unique()) if "category" in df else []
        return [(f"label={lab}", df[df["category"] == lab]) for lab in labels]

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        out = []
        for r in rows:
            truth = _yes_no(r.get("labels"))
            answers = chunk_answers(r)
            rec: dict[str, float] = {"n_chunks": float(len(answers))}
            for rule in RULES:
                a = aggregate_answers(answers, rule)  # type: ignore[arg-type]
                yes = a is True
                rec.update({
                    f"answer_{rule}": float("nan") if a is None else float(a),
                    f"correct_{rule}": float(a is not None and a == truth),
                    f"answered_{rule}": float(a is not None),
                    f"tp_{rule}": float(yes and truth is True), f"fp_{rule}": float(yes and truth is False),
                    f"fn_{rule}": float(not yes and truth is True), f"tn_{rule}": float(not yes and truth is False),
                })
            out.append(rec)
        return out

    def item_stats(self, df: pd.DataFrame, columns: list[str], unit: str = "item_id") -> pd.DataFrame:
        """Means per source recording, so a recording's labels resample together."""
        return mean_item_stats(df.assign(_recording=df[unit].map(recording_id)), columns, "_recording")


class BinaryChoiceScorer(Scorer):
    """Per binary-choice item: the labels named (P/R/F1 against the truth) and the chosen option (accuracy)."""

    protocol = "binary_choice"
    columns = ("choice", "correct", "answered", "tp", "fp", "fn", "precision", "recall", "f1")
    aggregates = (
        *(Aggregate(f"{k}_micro", ("tp", "fp", "fn"), micro_prf(k),
                    f"micro {k} of the labels named in the answer (extracted over the two presented options, united "
                    "over chunks) against the ground-truth label, TP/FP/FN pooled across items (the factual paper's "
                    "binary-choice P/R/F1: naming both options = recall 1, precision 0.5)")
          for k in ("precision", "recall", "f1")),
        Aggregate("accuracy", ("correct",), mean_of(),
                  "share of binary-choice items answered with the ground-truth label alone; unanswered (both, "
                  "neither, a hedge) = wrong (chance 0.5); chunks combined by majority, a tie is unanswered"),
        Aggregate("answered", ("answered",), mean_of(), "share of binary-choice items with exactly one label chosen"),
        Aggregate("accuracy_answered", ("correct", "answered"), lambda m: safe_ratio(m[..., 0], m[..., 1], np.nan),
                  "accuracy among answered binary-choice items"),
    )
    with_errors = (
        *(Aggregate(f"{k}_micro_with_errors", ("tp", "fp", "fn"), micro_prf(k),
                    f"micro {k} of the labels named against the ground-truth label, every errored request of the "
                    "cell counted as naming no label") for k in ("recall", "f1")),
        Aggregate("accuracy_with_errors", ("correct",), mean_of(),
                  "accuracy counting every errored request of the cell as wrong"),
    )

    def error_fill(self, row: dict[str, Any]) -> dict[str, float]:
        """An errored request names no label and chooses nothing."""
        return {"tp": 0.0, "fp": 0.0, "fn": 1.0, "correct": 0.0, "answered": 0.0}

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        out = []
        for r in rows:
            chunks = r.get("chunk_parsed")
            choice = combine_choices(chunks if chunks is not None else [r.get("parsed_index")])
            ci = r.get("correct_index")
            options = list(r.get("options") or [])
            truth = [options[ci]] if ci is not None and 0 <= ci < len(options) else []
            named = r.get("chunk_extracted")
            named = union_labels(named if named is not None else [r.get("extracted")])
            out.append({"choice": float(choice), "correct": float(choice >= 0 and ci is not None and choice == ci),
                        "answered": float(choice >= 0), **set_scores(named, truth)})
        return out
