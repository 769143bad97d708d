"""Item validation: a malformed item row becomes an error row with its reason, never a crash.

Beyond fields and types, text must be valid Unicode that encodes as UTF-8 (a JSON ``\\ud800`` escape
gives a lone surrogate that no Parquet/Arrow writer accepts) and of bounded length: ids and URIs
(``MAX_ID_CHARS``) and every other text (``MAX_TEXT_CHARS``, e.g. a 1 MB question is an error row).
"""

from __future__ import annotations

from typing import Any, Iterable

from evalcore.schema import ITEM, PROTOCOLS

_STR_FIELDS = ("item_id", "task", "audio_uri", "question", "reference", "category", "difficulty", "metadata")
_FLOAT_FIELDS = ("excerpt_start", "excerpt_end")
MAX_ID_CHARS = 1024  # item_id, audio_uri
MAX_TEXT_CHARS = 65_536  # question, reference, each label and option, metadata, ...


def _text_problem(field: str, v: str) -> str | None:
    """Why the text ``v`` of ``field`` cannot be used (too long, not encodable as UTF-8), or None."""
    limit = MAX_ID_CHARS if field in ("item_id", "audio_uri") else MAX_TEXT_CHARS
    if len(v) > limit:
        return f"field {field!r} is too long ({len(v)} characters > {limit})"
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"field {field!r} is not valid UTF-8 text ({e.reason} at character {e.start})"
    return None


def _check(row: dict[str, Any]) -> str | None:
    """The reason ``row`` is malformed, or None."""
    unknown = set(row) - set(ITEM.names)
    if unknown:
        return f"unknown field(s) {sorted(unknown)}"
    for f in _STR_FIELDS:
        v = row.get(f)
        if v is not None and not isinstance(v, str):
            return f"field {f!r} must be a string, got {type(v).__name__}"
        if v is not None and (problem := _text_problem(f, v)):
            return problem
    if not row.get("item_id"):
        return "missing item_id"
    if row.get("protocol") not in PROTOCOLS:
        return f"field 'protocol' must be one of {list(PROTOCOLS)}, got {row.get('protocol')!r}"
    for f in _FLOAT_FIELDS:
        v = row.get(f)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or v != v):
            return f"field {f!r} must be a number of seconds, got {v!r}"
    start, end = row.get("excerpt_start"), row.get("excerpt_end")
    if start is not None and start < 0:
        return f"excerpt_start must be >= 0, got {start}"
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
    if proto == "freeform" and not isinstance(row.get("reference"), str):
        return "free-form item needs a reference answer (string)"
    if proto == "factual" and row.get("labels") is None:
        return "factual item needs labels (a list of strings)"
    if proto == "true_false":
        if row.get("labels") not in (["yes"], ["no"]):
            return "true/false item needs labels ['yes'] or ['no']"
        if not row.get("options") or len(row["options"]) != 1:
            return "true/false item needs options = [the asked label]"
    if proto == "binary_choice" and len(row.get("options") or ()) != 2:
        return "binary-choice item needs exactly 2 options"
    if proto in ("mcq", "binary_choice"):
        opts, ci = row.get("options"), row.get("correct_option")
        if not opts or len(opts) < 2:
            return "multiple-choice item needs at least 2 options"
        if len(opts) > 26:
            return "multiple-choice item has more than 26 options"
        if isinstance(ci, bool) or not isinstance(ci, int) or not 0 <= ci < len(opts):
            return f"correct_option must be an index into options (0..{len(opts) - 1}), got {ci!r}"
        if len(set(opts)) != len(opts):
            return "options must be distinct"
    return None


def validate_items(dataset: str, rows: Iterable[Any]) -> tuple[list[dict], list[dict]]:
    """Split raw rows into (valid items, error rows); duplicate item ids after the first are errors."""
    good: list[dict] = []
    errors: list[dict] = []
    seen: set[str] = set()
    for i, raw in enumerate(rows):
        if not isinstance(raw, dict):
            what = raw if isinstance(raw, str) else f"not a mapping ({type(raw).__name__})"
            errors.append(_error(dataset, f"#{i}", f"item row #{i}: {what}"))
            continue
        row = {k: v for k, v in raw.items() if k != "dataset"}
        try:
            reason = _check(row)
        except Exception as e:  # a row so odd that checking it fails is still just a bad row
            reason = f"unreadable item row: {type(e).__name__}: {e}"
        rid = row.get("item_id")
        item_id = rid if isinstance(rid, str) and rid and _text_problem("item_id", rid) is None else f"#{i}"
        if reason is None and item_id in seen:
            reason = f"duplicate item_id {item_id!r}"
        if reason is not None:
            errors.append(_error(dataset, item_id, reason))
            continue
        seen.add(item_id)
        row["dataset"] = dataset
        for f in ("labels", "options"):
            if row.get(f) is not None:
                row[f] = list(row[f])
        for f in _FLOAT_FIELDS:
            if row.get(f) is not None:
                row[f] = float(row[f])
        good.append({name: row.get(name) for name in ITEM.names})
    return good, errors


def _error(dataset: str, item_id: str, reason: str) -> dict:
    return {"table": "items", "dataset": dataset, "item_id": item_id, "error_stage": "load", "error": reason}
