"""Item validation: a malformed item row becomes an error row with its reason, never a crash.

Beyond fields and types, text must be valid Unicode that encodes as UTF-8 (a JSON ``\\ud800`` escape
gives a lone surrogate that no Parquet/Arrow writer accepts) and of bounded length: ids and URIs
(``MAX_ID_CHARS``) and every other text (``MAX_TEXT_CHARS``, e.g. a 1 MB question is an error row).
Numbers are finite and bounded (excerpt times within ``schema.MAX_EXCERPT_SECONDS``; a 401-digit integer is an error
row, not an ``OverflowError``), ``metadata`` is a JSON object (text or mapping) at most
``MAX_METADATA_DEPTH`` deep, and a field the item schema does not know (``dataset`` included: the run
config names the dataset) is an error. Every check and conversion runs inside the per-row guard.
"""

from __future__ import annotations

import difflib
import json
import math
from typing import Any, Iterable, Iterator

from evalcore.datasets.base import BadItem
from evalcore.core.errors import INPUT, bounded, utf8_error
from evalcore.kinds.base import KINDS, kind_of
from evalcore.core.schema import ITEM, MAX_EXCERPT_SECONDS

_STR_FIELDS = ("item_id", "task", "audio_uri", "question", "reference", "category", "difficulty", "caption")
_FLOAT_FIELDS = ("excerpt_start", "excerpt_end")
#: the fields an item row may have; ``dataset`` is set from the config, never taken from a row
FIELDS = tuple(n for n in ITEM.names if n != "dataset")
MAX_ID_CHARS = 1024  # item_id, audio_uri
MAX_TEXT_CHARS = 65_536  # question, reference, each label and option, metadata, ...
MAX_METADATA_DEPTH = 32  # nesting of the metadata object


def text_problem(field: str, v: str) -> str | None:
    """Why the text ``v`` of ``field`` cannot be used (too long, not encodable as UTF-8), or None."""
    limit = MAX_ID_CHARS if field in ("item_id", "audio_uri") else MAX_TEXT_CHARS
    if len(v) > limit:
        return f"field {field!r} is too long ({len(v)} characters > {limit})"
    if (e := utf8_error(v)) is not None:
        return f"field {field!r} is not valid UTF-8 text ({e.reason} at character {e.start})"
    return None


_text_problem = text_problem


def _shown(v: Any) -> str:
    """A value as an error message shows it: short, whatever its size (a 401-digit integer is named so)."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**15:
        return f"an integer of {len(str(abs(v)))} digits"
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _seconds_problem(field: str, v: Any) -> str | None:
    """Why ``v`` is not a usable number of seconds for ``field``, or None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"field {field!r} must be a number of seconds, got {_shown(v)}"
    if isinstance(v, float) and not math.isfinite(v):
        return f"field {field!r} must be a finite number of seconds, got {v!r}"
    if not 0 <= v <= MAX_EXCERPT_SECONDS:  # int comparisons are exact: a huge integer never reaches float()
        return f"field {field!r} is out of range: {_shown(v)} not within 0..{MAX_EXCERPT_SECONDS:g} s"
    return None


def _depth(v: Any) -> int:
    """Nesting depth of a JSON value (0 for a scalar), iteratively (a 30,000-deep value is fine)."""
    deepest, stack = 0, [(v, 0)]
    while stack:
        x, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(x, dict):
            stack.extend((y, d + 1) for y in x.values())
        elif isinstance(x, list):
            stack.extend((y, d + 1) for y in x)
    return deepest


def metadata_text(v: Any) -> str:
    """``metadata`` (JSON text or a mapping) as JSON text of an object; ValueError naming the field."""
    if isinstance(v, str):
        if (problem := _text_problem("metadata", v)) is not None:
            raise ValueError(problem)
        try:
            parsed = json.loads(v)
        except RecursionError:
            raise ValueError("field 'metadata' is nested too deeply") from None
        except ValueError as e:
            raise ValueError(f"field 'metadata' is not valid JSON ({getattr(e, 'msg', e)})") from None
    elif isinstance(v, dict):
        parsed = v
    else:
        raise ValueError(f"field 'metadata' must be a JSON object (text or mapping), got {type(v).__name__}")
    if not isinstance(parsed, dict):
        raise ValueError(f"field 'metadata' must be a JSON object, got {type(parsed).__name__}")
    if _depth(parsed) > MAX_METADATA_DEPTH:
        raise ValueError(f"field 'metadata' is nested too deeply (more than {MAX_METADATA_DEPTH} levels)")
    if isinstance(v, str):
        return v
    try:
        text = json.dumps(parsed, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise ValueError(f"field 'metadata' is not JSON-serialisable ({e})") from None
    if (problem := _text_problem("metadata", text)) is not None:
        raise ValueError(problem)
    return text


#: other names accepted for an item field (the ``evalcore score`` inputs' name for it) → its item name
ALIASES = {"correct_index": "correct_option"}


def _unknown(names: set) -> str:
    """``unknown field(s) [...]`` with a "did you mean" per name difflib finds close to a field."""
    hints = []
    for name in sorted(names, key=str):
        close = difflib.get_close_matches(str(name), FIELDS, n=1, cutoff=0.6)
        hints += [f"{str(name)[:60]!r}: did you mean {close[0]!r}?"] if close else []
    return f"unknown field(s) {sorted(names, key=str)}" + (f" ({'; '.join(hints)})" if hints else "")


def canonical(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with accepted other names (``correct_index``) under the item's name (``correct_option``);
    ValueError when a row gives both and they differ."""
    for alias, name in ALIASES.items():
        if alias in row:
            row = dict(row)
            value = row.pop(alias)
            if name in row and row[name] != value:
                raise ValueError(f"fields {alias!r} and {name!r} name one value (the correct option's index) and "
                                 "disagree; keep one")
            row[name] = value
    return row


def _check(row: dict[str, Any]) -> str | None:
    """The reason ``row`` is malformed, or None."""
    unknown = set(row) - set(FIELDS)
    if unknown:
        return _unknown(unknown)
    for f in _STR_FIELDS:
        v = row.get(f)
        if v is not None and not isinstance(v, str):
            return f"field {f!r} must be a string, got {type(v).__name__}"
        if v is not None and (problem := _text_problem(f, v)):
            return problem
    if not row.get("item_id"):
        return "missing item_id"
    if kind_of(row.get("protocol")) is None:
        return f"field 'protocol' must be one of {KINDS.names()}, got {_shown(row.get('protocol'))}"
    for f in _FLOAT_FIELDS:
        v = row.get(f)
        if v is not None and (problem := _seconds_problem(f, v)):
            return problem
    start, end = row.get("excerpt_start"), row.get("excerpt_end")
    if start is not None and end is not None and end <= start:
        return f"excerpt_end ({end}) must be after excerpt_start ({start})"
    if not row.get("question"):
        return "missing question"
    proto = row["protocol"]
    if not row.get("audio_uri"):
        return "missing audio_uri"
    for f in ("labels", "options"):
        v = row.get(f)
        if v is not None and (not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v)):
            return f"field {f!r} must be a list of strings"
        for x in v or ():
            if problem := _text_problem(f, x):
                return problem
    if row.get("metadata") is not None:
        try:
            metadata_text(row["metadata"])
        except ValueError as e:
            return str(e)
    ci = row.get("correct_option")
    if ci is not None and (isinstance(ci, bool) or not isinstance(ci, int) or not 0 <= ci < 26):
        return f"field 'correct_option' must be an index into options (0..25), got {_shown(ci)}"
    return KINDS.get(proto).check_row(row)


class _Bad(ValueError):
    """A row's own mistake, reported as it is."""


def _item(dataset: str, row: dict[str, Any]) -> dict:
    """A checked row as an item of the schema: lists as lists, seconds as floats, metadata as JSON text."""
    item = {name: row.get(name) for name in ITEM.names}
    item["dataset"] = dataset
    for f in ("labels", "options"):
        if item[f] is not None:
            item[f] = list(item[f])
    for f in _FLOAT_FIELDS:
        if item[f] is not None:
            item[f] = float(item[f])
    if item["metadata"] is not None:
        item["metadata"] = metadata_text(item["metadata"])
    return item


def _usable_id(row: dict[str, Any], i: int) -> str:
    rid = row.get("item_id")
    return rid if isinstance(rid, str) and rid and _text_problem("item_id", rid) is None else f"#{i}"


def validate_items(dataset: str, rows: Iterable[Any]) -> tuple[list[dict], list[dict]]:
    """Split raw rows into (valid items, error rows); duplicate item ids after the first are errors."""
    good: list[dict] = []
    errors: list[dict] = []
    for item, error in validated(dataset, rows):
        if item is not None:
            good.append(item)
        else:
            errors.append(error)
    return good, errors


def validated(dataset: str, rows: Iterable[Any]) -> Iterator[tuple[dict | None, dict | None]]:
    """:func:`validate_items` one row at a time: (item, None) for a valid row, (None, error row) for a bad one (a
    :class:`~evalcore.datasets.base.BadItem` with its reason, or a row that is no mapping or fails a check)."""
    seen: set[str] = set()
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict):
            what = raw.reason if isinstance(raw, BadItem) else f"not a mapping ({type(raw).__name__})"
            yield None, _error(dataset, f"#{i}", f"item row #{i}: {what}")
            continue
        item_id, item = f"#{i}", None
        try:  # every check and conversion of one row: a row so odd that checking it fails is still just a bad row
            item_id = _usable_id(raw, i)
            try:
                raw = canonical(raw)
            except ValueError as e:
                raise _Bad(str(e)) from None
            reason = _check(raw)
            if reason is None and item_id in seen:
                reason = f"duplicate item_id {item_id!r}"
            if reason is None:
                item = _item(dataset, raw)
        except _Bad as e:
            reason = str(e)
        except Exception as e:  # noqa: BLE001
            reason = f"unreadable item row: {type(e).__name__}: {e}"
        if reason is not None or item is None:
            yield None, _error(dataset, item_id, reason or "unreadable item row")
            continue
        seen.add(item_id)
        yield item, None


def _error(dataset: str, item_id: str, reason: str) -> dict:
    return {"table": "items", "dataset": dataset, "item_id": item_id, "error_stage": "load",
            "error_class": INPUT, "error": bounded(reason)}
