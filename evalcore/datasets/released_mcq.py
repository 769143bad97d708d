"""What the loaders of MMAU, MMAR and MMAU-Pro share: their released records (a question, a list of choice texts,
the answer as one of those texts, a relative audio path) turned into MCQ item rows.

A record that cannot be an item comes back as a :class:`~evalcore.datasets.base.BadItem` with a one-line reason
(the dataset yields it, and validation makes it an error row of the ``load`` stage); nothing is dropped silently and nothing is guessed: an answer that is not
exactly one of the choices, a withheld answer (MMAU's test split) or a record that is not a mapping is such a
reason. Choices without any word (MMAR has ``""`` choices) are left out of the options and counted in
``metadata.dropped_empty_choices``: shown to a model they are an empty line, and the published word-set rule
would match them to any response naming no other choice.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from evalcore import storage
from evalcore.datasets.base import BadItem

_WORD = re.compile(r"\w")


def record_problem(bench: str, rec: Any) -> BadItem | None:
    """Why a released record is not one (an unreadable line, not a JSON object), or None for a record."""
    if isinstance(rec, BadItem):
        return rec
    return None if isinstance(rec, dict) else BadItem(f"{bench} record is not an object: {str(rec)[:80]!r}")


def read_records(uri: str) -> Iterator[Any]:
    """The records of a released JSON array (``mmau-test-mini.json``, MMAR's ``MMAR-meta.json``) or JSON Lines file
    (MMAR's ``MMAR-meta.jsonl``); an unreadable line comes back as a :class:`BadItem` with its reason."""
    raw = storage.read_text(uri)
    if raw.lstrip().startswith("["):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ValueError(f"{uri} is not a JSON list of records ({e.msg} at line {e.lineno})") from None
        yield from data
        return
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as e:
            yield BadItem(f"line {n} of {uri} is not JSON ({e.msg})")


def audio_uri(root: str, relative: Any) -> str | None:
    """``relative`` (a released path such as ``./test-mini-audios/<id>.wav``) under ``root``; None if not text."""
    if not isinstance(relative, str) or not relative.strip():
        return None
    rel = relative.strip()
    while rel.startswith("./"):
        rel = rel[2:]
    return storage.join(root, rel.lstrip("/"))


def text_list(v: Any) -> list[str] | None:
    """A released list of strings (a JSON list, a numpy array from Parquet); None if it is not one."""
    if v is None or isinstance(v, (str, bytes, dict)):
        return None
    try:
        out = list(v)
    except TypeError:
        return None
    return out if all(isinstance(x, str) for x in out) else None


def mcq_item(bench: str, item_id: Any, question: Any, choices: Any, answer: Any, audio: str | None,
             **fields: Any) -> dict[str, Any] | BadItem:
    """An MCQ item row (options = the choices with words, in released order; correct option = the answer's
    index), or the reason the record cannot be one. ``fields`` are further item fields (``task``, ``category``,
    ``difficulty``) and ``metadata`` (a dict)."""
    if not isinstance(item_id, str) or not item_id:
        return BadItem(f"{bench} record without an id")
    opts = text_list(choices)
    if opts is None:
        return BadItem(f"{bench} item {item_id!r}: choices is not a list of strings")
    kept = [c for c in opts if _WORD.search(c)]
    if not isinstance(answer, str) or not answer.strip():
        return BadItem(f"{bench} item {item_id!r}: no answer (the released file withholds it; evalcore scores only "
                       "items with an answer)")
    if answer not in kept:
        return BadItem(f"{bench} item {item_id!r}: answer {answer[:80]!r} is not one of its choices")
    meta = dict(fields.pop("metadata", None) or {})
    if len(kept) != len(opts):
        meta["dropped_empty_choices"] = len(opts) - len(kept)
    return {"item_id": item_id, "protocol": "mcq", "audio_uri": audio, "question": question, "options": kept,
            "correct_option": kept.index(answer), "metadata": json.dumps(meta), **fields}
