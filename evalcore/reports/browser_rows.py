"""The item browser's reading of a run's requests: each request's outcome, its answer as a reader sees it, and the
evidence that a model does not listen. Pandas over the run's tables (the per-item scores, the error rows, the
committed requests); nothing is computed again but these labels.

**Outcome** of a request (:func:`outcomes`), by its protocol's kind and the per-item columns its scorer wrote:

* ``error`` — an error row (any stage: decode, model, judge, score);
* ``mcq``, ``binary_choice``: ``right`` when the answer is correct (``correct`` 1: under a published rule, the
  rule's verdict, which may credit an answer naming no one option), else ``unparsed`` when no option was read from
  it (``answered`` 0), else ``wrong``; ``true_false``: the same on the majority rule's columns
  (``correct_majority``);
* ``factual``: ``unparsed`` when the answer names no label of the vocabulary (``tp + fp`` 0), ``right`` when its
  per-item F1 is 1, ``wrong`` when it is 0, ``partial`` between;
* ``freeform``: ``scored`` (a similarity, neither right nor wrong).

**The score** of a request (:func:`score_column`): ``correct`` (``correct_majority`` for true/false), ``f1`` for factual,
the first free-form metric column the run has (``bleu`` first, the verdict's order).

**Evidence of not listening** (:func:`evidence`): for a model's requests of one item under one prompt variant and
option order, each control condition (random, silence, noise, text_only) scored beside the correct audio where

* the answer equals the answer to the correct audio: the same option read (MCQ kinds; the options are shown in the
  same order under every condition), else the same labels extracted (factual), else the same text after
  lowercasing and collapsing whitespace (free-form, and answers nothing was read from); or
* the control's score is higher than the correct audio's.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from evalcore.kinds.base import kind_of
from evalcore.core.schema import CONDITIONS, STRICT

OUTCOMES = ("right", "partial", "wrong", "unparsed", "error", "scored")
CONTROLS = tuple(c for c in CONDITIONS if c != "correct")
#: free-form metric columns in the verdict's order of preference (any other metric column after them)
FREEFORM_FIRST = ("bleu", "meteor", "rouge", "bertscore", "cider", "claptext", "bleu4")
#: the per-item column of a published rule's strict verdict (``correct`` holds the rule's own)
STRICT_COLUMN = "correct" + STRICT
#: the request's group: a model's answers to one item under one prompt variant and option order
GROUP = ["protocol", "dataset", "item_id", "model", "variant", "option_order"]
_SPACE = re.compile(r"\s+")


def _num(df: pd.DataFrame, col: str) -> pd.Series:
    return pd.to_numeric(df[col], errors="coerce") if col in df.columns else pd.Series(np.nan, index=df.index)


def score_column(kind: str, columns: list[str] | pd.Index) -> str | None:
    """The per-item column read as the score of a request of protocol kind ``kind`` (:attr:`ProtocolKind.score_column`;
    a kind without one: the first free-form metric column)."""
    own = getattr(kind_of(kind), "score_column", None)
    if own is not None:
        return own if own in columns else None
    metrics = [c for c in FREEFORM_FIRST if c in columns]
    return metrics[0] if metrics else None


def scores(df: pd.DataFrame) -> pd.Series:
    """Each request's score (:func:`score_column`; NaN for an error row or a kind without one)."""
    out = pd.Series(np.nan, index=df.index, dtype=float)
    for kind, idx in df.groupby("protocol_kind", sort=False).groups.items():
        col = score_column(str(kind), df.columns)
        if col is not None:
            out.loc[idx] = _num(df.loc[idx], col)
    return out


def outcomes(df: pd.DataFrame) -> pd.Series:
    """Each request's outcome, one of :data:`OUTCOMES` (the module's docstring gives the rule)."""
    out = pd.Series("scored", index=df.index, dtype=object)
    kind = df["protocol_kind"].astype(str)
    for name in set(kind):
        spec, m = kind_of(name), kind == name
        if spec is not None and spec.outcome == "choice":
            ok, got = _num(df, str(spec.score_column)), _num(df, str(spec.answered_column))
            out[m] = np.where(ok[m] == 1, "right", np.where(got[m] == 0, "unparsed", "wrong"))
        elif spec is not None and spec.outcome == "labels":
            f1, named = _num(df, str(spec.score_column)), _num(df, "tp").fillna(0) + _num(df, "fp").fillna(0)
            out[m] = np.where(named[m] == 0, "unparsed", np.where(f1[m] >= 1, "right",
                                                                  np.where(f1[m] <= 0, "wrong", "partial")))
    out[df["error"].notna()] = "error"
    return out


def verdict_notes(df: pd.DataFrame) -> pd.Series:
    """Each request's note where a published rule's verdict (``correct``) and evalcore's strict reading
    (``correct_strict``) differ ("published rule: right · strict reading: wrong"); None elsewhere."""
    out = pd.Series(None, index=df.index, dtype=object)
    if STRICT_COLUMN not in df.columns:
        return out
    pub, strict = _num(df, "correct"), _num(df, STRICT_COLUMN)
    differ = pub.notna() & strict.notna() & (pub != strict)
    word = {1.0: "right", 0.0: "wrong"}
    out[differ] = [f"published rule: {word.get(p, f'{p:.3f}')} · strict reading: {word.get(s, f'{s:.3f}')}"
                   for p, s in zip(pub[differ], strict[differ])]
    return out


def _text(t: Any) -> str:
    return _SPACE.sub(" ", str(t or "")).strip().lower()


def answer_keys(df: pd.DataFrame) -> pd.Series:
    """What two answers are compared by: the option read, else the labels extracted, else the normalised text."""
    parsed = _num(df, "parsed_index")
    extracted = df["extracted"] if "extracted" in df.columns else pd.Series(None, index=df.index, dtype=object)
    text = df["text"] if "text" in df.columns else pd.Series("", index=df.index, dtype=object)
    keys = []
    for p, ex, t in zip(parsed.tolist(), extracted.tolist(), text.tolist()):
        if p == p and p >= 0:
            keys.append(f"option:{int(p)}")
        elif isinstance(ex, (list, tuple, np.ndarray)) and len(ex):
            keys.append("labels:" + "|".join(sorted(set(map(str, ex)))))
        else:
            keys.append("text:" + _text(t))
    return pd.Series(keys, index=df.index, dtype=object)


def evidence(df: pd.DataFrame) -> pd.DataFrame:
    """Evidence of not listening: one row per (request group, control) with its reason (``why``): ``same answer``
    or ``scores higher``. ``df``: requests with ``outcome``, ``score`` and ``answer_key`` (:func:`label`)."""
    ok = df[df["outcome"] != "error"]
    correct = ok[ok["condition"] == "correct"][GROUP + ["score", "answer_key"]]
    controls = ok[ok["condition"].isin(CONTROLS)][GROUP + ["condition", "score", "answer_key"]]
    both = controls.merge(correct, on=GROUP, suffixes=("", "_correct"))
    same = both["answer_key"] == both["answer_key_correct"]
    higher = both["score"] > both["score_correct"]
    hit = both[same | higher].copy()
    hit["why"] = np.where(same[same | higher], "same answer as with the correct audio",
                          "scores higher than with the correct audio")
    return hit[GROUP + ["condition", "why"]].reset_index(drop=True)


def label(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (request rows) with ``outcome``, ``score`` and ``answer_key``."""
    return df.assign(outcome=outcomes(df), score=scores(df), answer_key=answer_keys(df))


def answer_text(parsed: Any, extracted: Any, options: Any, kind: str) -> str | None:
    """The answer as the page shows it: ``B. guitar`` (the option read, in the order shown), the labels extracted,
    ``no option named`` / ``no label named``; None for a free-form answer (its text is shown whole)."""
    spec = kind_of(kind)
    if spec is not None and spec.text_metrics:
        return None
    if parsed is not None and parsed == parsed:
        p = int(parsed)
        if p < 0:
            return "no option named"
        opts = list(options) if options is not None else []
        return f"{_letter(p)}. {opts[p]}" if p < len(opts) else f"option {p}"
    if isinstance(extracted, (list, tuple, np.ndarray)):
        return ", ".join(map(str, extracted)) or "no label named"
    return None


def _letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else str(i + 1)
