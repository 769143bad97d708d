"""The derived factual formats: binary choice and true/false items from a factual dataset's items.

* :func:`binary_choice_items` — one ``binary_choice`` item per factual item: a ground-truth label vs
  one random distractor from the vocabulary (not in the ground truth), asked as "Between A and B,
  …"; the correct label comes first for exactly half of the items (``order="balanced"``, the default and
  the paper's "correct answer first in 50 % of the prompts": a seeded assignment over the whole list) or
  by a seeded coin per item (``order="coin"``).
* :func:`true_false_items` — one ``true_false`` item per (item, vocabulary label), "Is {label} used
  in this song?", labelled ``["yes"]`` or ``["no"]``, with the asked label as its one option. Per-chunk
  answers are aggregated in scoring, by :func:`evalcore.scorers.factual_modes.aggregate_answers` (rule
  ``"any"`` or ``"majority"``).
* :func:`derive_formats` — the items of a factual dataset in the formats a loader's ``formats``
  parameter asks for (``standard``, ``binary_choice``, ``true_false``).

The questions are the paper's (:data:`BINARY_QUESTIONS`, :data:`TRUE_FALSE_QUESTIONS`); the derived items carry
the whole prompt in their question (prompt variants
:data:`evalcore.protocols.factual_prompts.BINARY_VARIANTS` and ``TRUE_FALSE_VARIANTS``). The derived protocols
are scored by :mod:`evalcore.scorers.factual_formats` and judged by :mod:`evalcore.judges.yes_no` (their
default judges).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from evalcore.kinds.base import kind_of
from evalcore.core.seeding import rng
from evalcore.vocab.labels import family

__all__ = ["BINARY_QUESTIONS", "TRUE_FALSE_QUESTIONS", "BINARY_ORDERS", "FORMATS", "binary_choice_items",
           "true_false_items", "derive_formats"]

#: "Between A and B, …" questions (Tables 7 and 13, word for word; the instrument one is ours)
BINARY_QUESTIONS: dict[str, str] = {
    "genre": "Between {a} and {b}, what is a better description of the genre of this piece?",
    "composer": "Between {a} and {b}, whose style does this piece resemble the most?",
    "instrument": "Between {a} and {b}, which instrument is used in this piece of music?",
}
#: true/false questions per label (Tables 8 and 9, word for word; genre and composer ones are ours)
TRUE_FALSE_QUESTIONS: dict[str, str] = {
    "instrument": "Is {label} used in this song?",
    "genre": "Is the genre of this song {label}?",
    "composer": "Does this piece sound like the style of {label}?",
}


def _factual(item: dict) -> bool:
    """Whether ``item`` is a factual item: labels of a closed vocabulary, from which the derived formats are made."""
    kind = kind_of(item.get("protocol"))
    return kind is not None and kind.labels_in_vocabulary


def _base(item: dict) -> dict[str, Any]:
    """The fields a derived item keeps from its source (audio, excerpt, dataset)."""
    return {k: item[k] for k in ("dataset", "audio_uri", "excerpt_start", "excerpt_end", "difficulty") if k in item}


#: how binary-choice items order their two labels
BINARY_ORDERS = ("balanced", "coin")


def binary_choice_items(items: Iterable[dict], vocab: Sequence[str], seed: int, template: str | None = None,
                        order: str = "balanced") -> list[dict]:
    """One ``binary_choice`` item per factual item: a ground-truth label vs one distractor, in seeded order.

    For a multi-label item the ground-truth label is drawn at random (seeded). ``options`` holds the two labels in
    the asked order and ``correct_option`` the truth's index; the question names them in that order ("Between A and
    B, …"), so use a template like ``{question}`` (:data:`evalcore.protocols.factual_prompts.BINARY_VARIANTS`).
    Labels are drawn from (seed, item id), so adding items does not change others' labels. ``order="balanced"`` puts
    the truth first for exactly ⌊n/2⌋ of the n items that can be asked (by a seeded permutation of them);
    ``order="coin"`` flips a seeded coin per item (depending only on (seed, item id)). A factual item without
    labels, or whose labels cover the vocabulary, yields an item with fewer than two options, which validation
    reports.
    """
    if order not in BINARY_ORDERS:
        raise ValueError(f"binary_order must be one of {list(BINARY_ORDERS)}, got {order!r}")
    balanced = order == "balanced"
    factual = [it for it in items if _factual(it)]
    vocab = list(dict.fromkeys(vocab))
    # the items that can be asked (a true label and a distractor): "exactly half" is of these
    usable = [k for k, it in enumerate(factual)
              if it.get("labels") and any(v not in it["labels"] for v in vocab)]
    first: dict[int, bool] = {}
    if balanced:
        perm = rng("binary-choice-balance", seed, len(usable)).permutation(len(usable))
        first = {usable[int(j)]: pos < len(usable) // 2 for pos, j in enumerate(perm)}
    out = []
    for k, it in enumerate(factual):
        r = rng("binary-choice", seed, it.get("dataset"), it.get("item_id"))
        truth = list(dict.fromkeys(it.get("labels") or []))
        pool = [v for v in vocab if v not in truth]
        coin = bool(r.random() < 0.5)  # drawn in both orders, so the labels below do not depend on the order
        correct_first = coin if not balanced else first.get(k, coin)
        meta = {"source_item_id": it.get("item_id"), "source_task": it.get("task"), "source_labels": truth}
        row = {**_base(it), "item_id": f"{it.get('item_id')}:binary", "protocol": "binary_choice",
               "task": f"{it.get('task')}-binary", "category": it.get("category")}
        if not truth or not pool:
            meta["error"] = "no ground-truth label" if not truth else "no distractor outside the ground truth"
            row.update(question=f"(no binary choice: {meta['error']})", options=truth[:1],
                       correct_option=0, metadata=json.dumps(meta))
            out.append(row)
            continue
        right = truth[int(r.integers(len(truth)))]
        wrong = pool[int(r.integers(len(pool)))]
        options = [right, wrong] if correct_first else [wrong, right]
        q = template or BINARY_QUESTIONS[family(it.get("task"))]
        meta.update(truth=right, distractor=wrong, correct_first=correct_first, order=order)
        row.update(question=q.format(a=options[0], b=options[1]), options=options,
                   correct_option=0 if correct_first else 1, metadata=json.dumps(meta))
        out.append(row)
    return out


def true_false_items(items: Iterable[dict], vocab: Sequence[str], template: str | None = None) -> list[dict]:
    """Per (factual item, vocabulary label) a ``true_false`` item "Is {label} used in this song?" whose
    labels are ``["yes"]`` (the label is in the ground truth) or ``["no"]`` and whose one option is the label.

    ``category`` is the asked label (per-label breakdowns); ``metadata`` names the label, the
    truth and the source item. A source item without labels yields rows without labels (error rows).
    """
    vocab = list(dict.fromkeys(vocab))
    out = []
    for it in items:
        if not _factual(it):
            continue
        truth = it.get("labels")
        q = template or TRUE_FALSE_QUESTIONS[family(it.get("task"))]
        for label in vocab:
            present = None if truth is None else label in truth
            out.append({
                **_base(it), "item_id": f"{it.get('item_id')}:tf:{label}", "protocol": "true_false",
                "task": f"{it.get('task')}-true-false", "question": q.format(label=label),
                "labels": None if present is None else ["yes" if present else "no"], "category": label,
                "options": [label],
                "metadata": json.dumps({"source_item_id": it.get("item_id"), "source_task": it.get("task"),
                                        "label": label, "present": present, "source_labels": truth}),
            })
    return out


#: the formats a factual loader can emit (its ``formats`` parameter)
FORMATS = ("standard", "binary_choice", "true_false")


def derive_formats(items: Iterable[dict], formats: Sequence[str], vocab: Sequence[str], seed: int,
                   binary_order: str = "balanced", distractors: Sequence[str] | None = None) -> list[dict]:
    """The factual ``items`` in each of ``formats``, in that order: ``standard`` (the items themselves),
    ``binary_choice`` (:func:`binary_choice_items`, seeded by ``seed``, labels ordered by ``binary_order``,
    distractors drawn from ``distractors``, default ``vocab``) and ``true_false`` (:func:`true_false_items`
    over ``vocab``)."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ValueError(f"unknown or no format(s) {unknown}; known: {', '.join(FORMATS)}")
    if binary_order not in BINARY_ORDERS:
        raise ValueError(f"binary_order must be one of {list(BINARY_ORDERS)}, got {binary_order!r}")
    items = list(items)
    out: list[dict] = []
    for f in dict.fromkeys(formats):
        if f == "standard":
            out += items
        elif f == "binary_choice":
            out += binary_choice_items(items, vocab if distractors is None else distractors, seed,
                                       order=binary_order)
        else:
            out += true_false_items(items, vocab)
    return out
