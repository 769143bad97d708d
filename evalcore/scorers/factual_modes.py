"""FMA hierarchy modes, per-label P/R/F1 and chunk aggregation for the factual protocol (pure functions).

Hierarchy modes compare a predicted label set with a ground-truth set given a genre tree, written
as a map ``genre → top-level genre`` (a genre absent from the map is its own top level):

* ``"top"``: both sets are mapped to their top-level genres, then compared exactly.
* ``"same-tree"``: a predicted label lying in the top-level tree of a ground-truth label is
  credited as that ground-truth label (the first such one, in ground-truth order; an exact
  match credits itself), other predictions stay as they are; then compared exactly. So
  "techno" for ground truth "electronic" is a TP, "techno, house" is still one TP (deduped),
  "rock" for ground truth "electronic" is an FP plus an FN.
* ``"same-node"``: exact comparison (paper App. C.3).

Chunked models (paper §4.2): labels extracted from each 60 s chunk are united in order of first
appearance (:func:`union_labels`); true/false answers per label ("Is piano used in this song?")
are aggregated over chunks by ``"any"`` (yes in at least one chunk) or ``"majority"`` (yes in
strictly more than half of the chunks that gave an answer; a tie is no).
"""

from __future__ import annotations

from typing import Iterable, Literal, Mapping, Sequence

from evalcore.scorers.factual import set_scores

Mode = Literal["top", "same-tree", "same-node"]
Rule = Literal["any", "majority"]
MODES: tuple[str, ...] = ("top", "same-tree", "same-node")


def top_level(label: str, tree: Mapping[str, str]) -> str:
    """The top-level genre of ``label`` (itself when not in ``tree``)."""
    return tree.get(label, label)


def apply_mode(predicted: Sequence[str], truth: Sequence[str], tree: Mapping[str, str],
               mode: Mode) -> tuple[list[str], list[str]]:
    """(predicted, truth) rewritten so that an exact set comparison implements ``mode``."""
    if mode == "same-node":
        return list(predicted), list(truth)
    if mode == "top":
        return _dedupe(top_level(p, tree) for p in predicted), _dedupe(top_level(t, tree) for t in truth)
    if mode == "same-tree":
        credited = []
        for p in predicted:
            if p in truth:
                credited.append(p)
                continue
            root = top_level(p, tree)
            credited.append(next((t for t in truth if top_level(t, tree) == root), p))
        return _dedupe(credited), list(truth)
    raise ValueError(f"unknown hierarchy mode {mode!r}; known: {', '.join(MODES)}")


def mode_scores(predicted: Sequence[str], truth: Sequence[str], tree: Mapping[str, str],
                mode: Mode) -> dict[str, float]:
    """TP/FP/FN and P/R/F1 (see :func:`evalcore.scorers.factual.set_scores`) under ``mode``."""
    return set_scores(*apply_mode(predicted, truth, tree, mode))


def per_label(pairs: Iterable[tuple[Sequence[str], Sequence[str]]]) -> dict[str, dict[str, float]]:
    """Per-label TP/FP/FN, support (= TP + FN) and P/R/F1 over (predicted, truth) items.

    A label appears if it was predicted or true at least once. Undefined ratios (a label never
    predicted → precision; never true → recall) are NaN; F1 = 2TP / (2TP + FP + FN).
    """
    counts: dict[str, list[int]] = {}
    for predicted, truth in pairs:
        p, t = set(predicted), set(truth)
        for lab in sorted(p | t):
            c = counts.setdefault(lab, [0, 0, 0])
            c[0] += lab in p and lab in t
            c[1] += lab in p and lab not in t
            c[2] += lab in t and lab not in p
    nan = float("nan")
    return {
        lab: {"tp": float(tp), "fp": float(fp), "fn": float(fn), "support": float(tp + fn),
              "precision": tp / (tp + fp) if tp + fp else nan,
              "recall": tp / (tp + fn) if tp + fn else nan,
              "f1": 2 * tp / (2 * tp + fp + fn)}
        for lab, (tp, fp, fn) in sorted(counts.items())
    }


def union_labels(chunks: Iterable[Sequence[str] | None]) -> list[str]:
    """Labels of all chunks united, in order of first appearance (``None`` chunks skipped)."""
    return _dedupe(lab for chunk in chunks if chunk for lab in chunk)


def aggregate_answers(answers: Sequence[bool | None], rule: Rule) -> bool | None:
    """One true/false answer from per-chunk answers (``None`` = no usable answer, ignored).

    ``"any"``: True if any chunk says yes. ``"majority"``: True if more than half of the chunks
    that answered say yes (ties → False). ``None`` when no chunk answered.
    """
    given = [a for a in answers if a is not None]
    if not given:
        return None
    if rule == "any":
        return any(given)
    if rule == "majority":
        return 2 * sum(given) > len(given)
    raise ValueError(f"unknown chunk rule {rule!r}; known: any, majority")


def true_false_labels(answers: Mapping[str, Sequence[bool | None]], rule: Rule) -> list[str]:
    """The predicted label set from per-label, per-chunk true/false answers (labels answered yes)."""
    return [lab for lab, per_chunk in answers.items() if aggregate_answers(per_chunk, rule)]


def _dedupe(labels: Iterable[str]) -> list[str]:
    out: list[str] = []
    for lab in labels:
        if lab not in out:
            out.append(lab)
    return out
