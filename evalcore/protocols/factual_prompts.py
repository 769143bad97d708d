"""Factual-QA prompt sets (paper App. B) and the derived formats: binary choice and true/false.

* :data:`PAPER_PROMPTS` — per task, variant name → template for a protocol config's ``variants``: the
  paper's three phrasings per task plus the "Among {vocabulary}, …" form listing every label, word for
  word as its Tables 4-6, 12 and 14 print them (two genre prompts end without "?"); the configs in
  ``configs/paper/`` use them. :data:`PROMPTS` is evalcore's wording (the same, with the "?"), the set
  :func:`variants` uses by default; :data:`PROMPT_SETS` names both.
  Note: :func:`evalcore.protocols.requests.expand_requests` renders templates without a
  vocabulary, so use :func:`variants` (which writes the vocabulary into the template) for the
  "among" form in a run config.
* :func:`binary_choice_items` — one ``binary_choice`` item per factual item: a ground-truth label vs
  one random distractor from the vocabulary (not in the ground truth), asked as "Between A and B,
  …"; the correct label comes first for exactly half of the items (``order="balanced"``, the default and
  the paper's "correct answer first in 50 % of the prompts": a seeded assignment over the whole list) or
  by a seeded coin per item (``order="coin"``).
* :func:`true_false_items` — one ``true_false`` item per (item, vocabulary label), "Is {label} used
  in this song?", labelled ``["yes"]`` or ``["no"]``, with the asked label as its one option. Per-chunk
  answers are aggregated in scoring, by :func:`evalcore.metrics.factual_modes.aggregate_answers` (rule
  ``"any"`` or ``"majority"``).
* :func:`derive_formats` — the items of a factual dataset in the formats a loader's ``formats``
  parameter asks for (``standard``, ``binary_choice``, ``true_false``).

The derived protocols are scored by :mod:`evalcore.metrics.factual_formats` and judged by
:mod:`evalcore.judges.yes_no` (their default judges).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from evalcore.protocols.seeding import rng

__all__ = ["PROMPTS", "PAPER_PROMPTS", "PROMPT_SETS", "BINARY_QUESTIONS", "TRUE_FALSE_QUESTIONS", "BINARY_VARIANTS",
           "TRUE_FALSE_VARIANTS", "prompts_for", "variants", "binary_choice_items", "true_false_items",
           "FORMATS", "BINARY_ORDERS", "derive_formats"]

PROMPTS: dict[str, dict[str, str]] = {
    "instrument": {  # Table 5
        "used": "Which instruments are used in this piece of music?",
        "instrumentation": "Which instruments constitute the instrumentation of this piece?",
        "playing": "What instruments are playing in this song?",
        "among": "Among {vocabulary}, which instruments are used in this piece of music?",
    },
    "genre": {  # Tables 6 and 14
        "what-is": "What is the genre of this song?",
        "infer": "What can you infer about the genre of the music?",
        "fall-under": "What genre does this piece of music fall under?",
        "among": "Among {vocabulary}, what is the genre of this song?",
    },
    "composer": {  # Table 12
        "resemble": "Which classical composer's style does this piece resemble the most?",
        "closely": "Which classical composer's compositional style does this piece most closely resemble?",
        "sound-like": "Which classical composer's work does this sound like?",
        "among": "Among {vocabulary}, whose style does this piece of music sound like?",
    },
}

#: the paper's prompts word for word (Table 5: instruments; Tables 6 and 14: genres, where "What is the genre of
#: this song" and "What can you infer about the genre of the music" print no "?"; Table 12: composers; the
#: "Among {*}" forms of Table 4); ``{vocabulary}`` is where the paper prints "{*}" / "{all genres}"
PAPER_PROMPTS: dict[str, dict[str, str]] = {
    "instrument": dict(PROMPTS["instrument"]),
    "genre": {**PROMPTS["genre"], "what-is": "What is the genre of this song",
              "infer": "What can you infer about the genre of the music"},
    "composer": dict(PROMPTS["composer"]),
}
#: the named prompt sets: evalcore's wording and the paper's
PROMPT_SETS: dict[str, dict[str, dict[str, str]]] = {"evalcore": PROMPTS, "paper": PAPER_PROMPTS}

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
#: the derived items carry the whole prompt in their question
BINARY_VARIANTS = {"binary": "{question}"}
TRUE_FALSE_VARIANTS = {"true-false": "{question}"}


def _family(task: str | None) -> str:
    """"genre-tree"/"genre-node" share the genre prompts."""
    t = task or ""
    if t.startswith("genre"):
        return "genre"
    if t in PROMPTS:
        return t
    raise ValueError(f"no factual prompts for task {task!r}; known: genre[-tree|-node], instrument, composer")


def prompts_for(task: str, prompts: str = "evalcore") -> dict[str, str]:
    """The raw prompt set of ``task`` (templates may contain ``{vocabulary}``) in the named set
    (:data:`PROMPT_SETS`: ``evalcore`` or ``paper``)."""
    if prompts not in PROMPT_SETS:
        raise ValueError(f"unknown prompt set {prompts!r}; known: {', '.join(PROMPT_SETS)}")
    return dict(PROMPT_SETS[prompts][_family(task)])


def variants(task: str, vocabulary: Sequence[str] | None = None, names: Sequence[str] | None = None,
             prompts: str = "evalcore") -> dict[str, str]:
    """Prompt variants of the named set ready for a protocol config: ``{vocabulary}`` written in as "a, b, c"
    (default: the task's closed vocabulary); ``names`` keeps a subset, in that order."""
    from evalcore.judges.vocab import vocabulary as task_vocabulary

    vocab = list(vocabulary) if vocabulary is not None else task_vocabulary(task)
    listed = ", ".join(vocab).replace("{", "{{").replace("}", "}}")
    raw = prompts_for(task, prompts)
    unknown = [n for n in (names or ()) if n not in raw]
    if unknown:
        raise ValueError(f"unknown prompt variant(s) {unknown}; known: {sorted(raw)}")
    return {n: raw[n].replace("{vocabulary}", listed) for n in (names or raw)}


def _meta(item: dict) -> dict[str, Any]:
    try:
        m = json.loads(item.get("metadata") or "{}")
    except (TypeError, ValueError):
        return {}
    return m if isinstance(m, dict) else {}


def _base(item: dict) -> dict[str, Any]:
    """The fields a derived item keeps from its source (audio, excerpt, dataset)."""
    return {k: item[k] for k in ("dataset", "audio_uri", "excerpt_start", "excerpt_end", "difficulty") if k in item}


#: how binary-choice items order their two labels
BINARY_ORDERS = ("balanced", "coin")


def binary_choice_items(items: Iterable[dict], vocab: Sequence[str], seed: int, template: str | None = None,
                        order: str = "balanced") -> list[dict]:
    """One ``binary_choice`` item per factual item: a ground-truth label vs one distractor, in seeded order.

    For a multi-label item the ground-truth label is drawn at random (seeded). ``options`` holds
    the two labels in the asked order and ``correct_option`` the truth's index; the question
    names them in that order ("Between A and B, …"), so use a template like ``{question}``
    (:data:`BINARY_VARIANTS`). Labels are drawn from (seed, item id), so adding items does not change
    others' labels. ``order="balanced"`` puts the truth first for exactly ⌊n/2⌋ of the n items that can be
    asked (by a seeded permutation of them); ``order="coin"`` flips a seeded coin per item (depending only on
    (seed, item id)). A factual item without labels, or whose labels cover the vocabulary, yields an
    item with fewer than two options, which validation reports.
    """
    if order not in BINARY_ORDERS:
        raise ValueError(f"binary_order must be one of {list(BINARY_ORDERS)}, got {order!r}")
    balanced = order == "balanced"
    factual = [it for it in items if it.get("protocol") == "factual"]
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
        q = template or BINARY_QUESTIONS[_family(it.get("task"))]
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
        if it.get("protocol") != "factual":
            continue
        truth = it.get("labels")
        q = template or TRUE_FALSE_QUESTIONS[_family(it.get("task"))]
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
