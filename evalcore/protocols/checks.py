"""Checks of a run's valid items where data is probably wrong: warnings, and an error where it surely is.

* **Look-alike ids**: item ids of one dataset that are equal after NFKC normalisation, removing
  invisible format characters (zero-width space, ...), stripping and case folding ("Q1", "q1 ",
  "Ｑ1", "Q\\u200b1") are probably one item written twice: a warning lists them; each stays an item.
* **Labels outside the vocabulary**: a factual item's labels are compared, as written, with the labels
  its protocol's judge can extract (the lexicon of its vocabulary, per task for ``auto``; an
  ``llm_extractor``'s vocabulary). A label the judge can never extract can never be matched: a
  warning counts them, and an item whose every label is outside is an error row (it would score F1 0
  whatever the model says). Judges whose vocabulary cannot be known here are not checked.
"""

from __future__ import annotations

import json
import unicodedata
from collections import Counter, defaultdict
from typing import Any

from evalcore.core.errors import INPUT
from evalcore.kinds.base import KINDS
from evalcore.vocab.lexicon import LEXICONS
from evalcore.vocab.tasks import TaskLexicons

#: labels shown per warning (the rest counted)
SHOWN = 8


def fold_id(item_id: str) -> str:
    """An id as a person reads it: NFKC, format characters (zero-width space, ...) removed, stripped, case-folded."""
    s = unicodedata.normalize("NFKC", item_id)
    s = "".join(c for c in s if unicodedata.category(c) != "Cf").strip().casefold()
    return unicodedata.normalize("NFKC", s)


def look_alike_ids(items: list[dict]) -> list[tuple[str, list[str]]]:
    """(dataset, ids) for every group of distinct ids of one dataset equal under :func:`fold_id`."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for it in items:
        groups[(it["dataset"], fold_id(it["item_id"]))].append(it["item_id"])
    return [(ds, ids) for (ds, _), ids in groups.items() if len(ids) > 1]


def judge_labels(kind: str, params: dict[str, Any]):
    """A function task → the labels the judge can extract (None: not known), or None for judges not checked."""
    try:
        if kind == "lexicon":
            judge = TaskLexicons(**params)  # the lexicon judge's choice of each row's lexicon

            def labels(task: str | None) -> frozenset[str] | None:
                try:
                    return frozenset(judge.labels_for(task))
                except ValueError:  # an unknown task under "auto": the judge reports it per row
                    return None
            return labels
        if kind == "llm_extractor":
            vocab = params.get("vocabulary", "instrument")
            fixed = frozenset(LEXICONS[vocab].labels if isinstance(vocab, str) else map(str, vocab))
            return lambda task: fixed
    except (KeyError, ValueError, TypeError, OSError):  # a judge that cannot be built fails in its own stage
        return None
    return None


def check_labels(items: list[dict], judges: dict[str, tuple[str, str]]) -> tuple[list[dict], list[dict], Counter]:
    """(items kept, error rows of items whose every label is outside, counts of outside labels of kept items).

    ``judges``: protocol → (judge kind, params JSON), as the run applies them."""
    spec = judges.get("factual")
    labels_of = judge_labels(spec[0], json.loads(spec[1])) if spec else None
    if labels_of is None:
        return items, [], Counter()
    kept: list[dict] = []
    errors: list[dict] = []
    outside: Counter = Counter()
    for it in items:
        vocab = labels_of(it.get("task")) if KINDS.get(it["protocol"]).labels_in_vocabulary else None
        if vocab is None:
            kept.append(it)
            continue
        out = [x for x in it["labels"] if x not in vocab]
        if out and len(out) == len(it["labels"]):
            errors.append({"table": "items", "dataset": it["dataset"], "item_id": it["item_id"], "error_stage": "load",
                           "error_class": INPUT, "error": f"labels outside the judge's vocabulary: {_listed(out)}"})
            continue
        outside.update(out)
        kept.append(it)
    return kept, errors, outside


def check_instances(items: list[dict], instances: list[tuple[set[str] | None, tuple[str, str]]]
                    ) -> tuple[list[dict], list[dict], Counter]:
    """:func:`check_labels` for a run's factual protocol instances, each (its datasets or None for all, its judge):
    an item is an error row only when its labels are all outside for every instance that reads it."""
    key = lambda it: (it["dataset"], it["item_id"])  # noqa: E731
    covered: Counter = Counter()
    failed: dict[tuple, list[dict]] = defaultdict(list)
    outside: Counter = Counter()
    for datasets, spec in instances:
        sub = [it for it in items if KINDS.get(it["protocol"]).labels_in_vocabulary
               and (datasets is None or it["dataset"] in datasets)]
        _, errors, out = check_labels(sub, {"factual": spec})
        outside.update(out)
        covered.update(key(it) for it in sub)
        for e in errors:
            failed[(e["dataset"], e["item_id"])].append(e)
    drop = {k for k, errs in failed.items() if len(errs) == covered[k]}
    return [it for it in items if key(it) not in drop], [failed[k][0] for k in sorted(drop)], outside


def _listed(labels: list[str]) -> str:
    shown = ", ".join(repr(x[:40]) for x in labels[:SHOWN])
    return shown + (f" and {len(labels) - SHOWN} more" if len(labels) > SHOWN else "")


def warnings(items: list[dict], judges: dict[str, tuple[str, str]], outside: Counter | None = None) -> list[str]:
    """The run's data warnings: look-alike ids, labels outside the factual judge's vocabulary (``outside``, when
    given, counts them already, e.g. from :func:`check_instances`)."""
    out = [f"dataset {ds!r}: item ids that differ only in case, spacing, invisible or full-width characters: "
           f"{_listed(ids)}" for ds, ids in look_alike_ids(items)]
    if outside is None:
        _, _, outside = check_labels(items, judges)
    if outside:
        counted = ", ".join(f"{x[:40]!r} ×{n}" for x, n in outside.most_common(SHOWN))
        more = f" and {len(outside) - SHOWN} more" if len(outside) > SHOWN else ""
        out.append(f"{sum(outside.values())} factual label(s) outside the judge's vocabulary (never matched): "
                   f"{counted}{more}")
    return out
