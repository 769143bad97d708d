"""What the loaders of MMAU, MMAR and MMAU-Pro share: their released records (a question, a list of choice texts,
the answer as one of those texts, a relative audio path) turned into MCQ item rows.

A record that cannot be an item comes back as a :class:`~evalcore.datasets.base.BadItem` with a one-line reason
(the dataset yields it, and validation makes it an error row of the ``load`` stage); nothing is dropped silently
and nothing is guessed: an answer that is not exactly one of the choices, a withheld answer (MMAU's test split), a
record that is not a mapping, a record the file's guards cannot read (:mod:`evalcore.datasets.records`: too deep,
an integer too long, bytes that are not UTF-8), a record without the field its subset is chosen by, or an audio
path that leaves ``audio_root`` is such a reason. Blank choices (MMAR has ``""`` choices) are left out of the
options and counted in ``metadata.dropped_empty_choices``: shown to a model they are an empty line. A choice of
symbols only ("♯", "🎸") is text and stays an option (the published word-set rule matches no response to it:
``judges/mmau.py``).
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from evalcore.core import storage
from evalcore.datasets.base import BadItem
from evalcore.datasets.records import FileUnreadable, check_json, json_records, jsonl_records, outside_root


def record_problem(bench: str, rec: Any) -> BadItem | None:
    """Why a released record is not one (an unreadable line, not a JSON object), or None for a record."""
    if isinstance(rec, BadItem):
        return rec
    return None if isinstance(rec, dict) else BadItem(f"{bench} record is not an object: {str(rec)[:80]!r}")


def subset_problem(bench: str, rec: dict, field: str) -> BadItem | None:
    """Why a record cannot be placed in or out of the configured subset (its ``field`` is missing or not text),
    or None: such a record is an error row, never left out silently."""
    v = rec.get(field)
    if isinstance(v, str) and v:
        return None
    return BadItem(f"{bench} item {str(rec.get('id'))[:80]!r}: no {field} (the subset is chosen by it); "
                   f"got {str(v)[:40]!r}")


def read_records(uri: str) -> Iterator[Any]:
    """The records of a released JSON array (``mmau-test-mini.json``, MMAR's ``MMAR-meta.json``) or JSON Lines file
    (MMAR's ``MMAR-meta.jsonl``); an unreadable record comes back as a :class:`BadItem` with its reason
    (:class:`Unreadable`); a file that cannot be read at all raises
    :class:`~evalcore.datasets.records.FileUnreadable` naming ``path``."""
    raw = storage.read_bytes(uri)
    if raw.lstrip().startswith(b"["):
        yield from (rec for _, rec in json_records(raw, "path", uri, "list"))
        return
    if not raw.strip():
        raise FileUnreadable(f"path: {uri!r} is empty")
    yield from jsonl_records(raw, uri)


def check_records(uri: str) -> None:
    """:func:`read_records` to the end, for ``evalcore validate``: FileUnreadable when the file cannot be read."""
    raw = storage.read_bytes(uri)
    if not raw.strip():
        raise FileUnreadable(f"path: {uri!r} is empty")
    check_json(uri, "path", "list" if raw.lstrip().startswith(b"[") else "lines")


class AudioOutside(str):
    """A released audio path that leaves its root (``../../etc/passwd``): the record's reason, never opened."""


def audio_uri(root: str, relative: Any) -> str | AudioOutside | None:
    """``relative`` (a released path such as ``./test-mini-audios/<id>.wav``) under ``root``; None if not text;
    :class:`AudioOutside` when it leaves ``root``: by its text (``../``) or through a symlink inside the root that
    leads out (checked on the resolved path: :func:`~evalcore.datasets.records.outside_root`)."""
    if not isinstance(relative, str) or not relative.strip():
        return None
    rel = relative.strip()
    while rel.startswith("./"):
        rel = rel[2:]
    if outside_root(root, rel):
        return AudioOutside(f"audio path {relative[:120]!r} leaves audio_root (never opened)")
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
    """An MCQ item row (options = the choices that are not blank, in released order; correct option = the answer's
    index), or the reason the record cannot be one. ``fields`` are further item fields (``task``, ``category``,
    ``difficulty``) and ``metadata`` (a dict)."""
    if not isinstance(item_id, str) or not item_id:
        return BadItem(f"{bench} record without an id")
    if isinstance(audio, AudioOutside):
        return BadItem(f"{bench} item {item_id!r}: {audio}")
    opts = text_list(choices)
    if opts is None:
        return BadItem(f"{bench} item {item_id!r}: choices is not a list of strings")
    kept = [c for c in opts if c.strip()]
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
