"""Reading released benchmark files with the items file's guards: one bad record is that record's error row, a file
that cannot be read at all is a config error naming the param, and no record is dropped uncounted.

What the guards cover (the items file's own, :mod:`evalcore.datasets.items_file`, applied to the released
layouts):

* **JSON files** (a list of records, MMAU / MusicQA; an object keyed by id, RUL-MuchoMusic): parsed whole when they
  parse; otherwise split into their top-level records by a scan that counts brackets outside strings (no
  recursion, so no depth is too deep) and each record parsed alone, so a record nested too deeply, an integer
  past Python's 4,300 digits or bytes that are not UTF-8 are that record's reason (:class:`Unreadable`), named
  by its position (and key). A file that is empty, not JSON, of the wrong shape or cut short (the scan never
  closes its list) cannot be read at all: :class:`FileUnreadable`, ``ValueError("<param>: …")``, which
  ``evalcore validate`` reports naming the field (``check_files``) and which fails a run before it starts.
* **Duplicate keys** of an object keyed by id are kept, each occurrence in file order (:func:`json_records`
  yields pairs, never a dict): validation then makes the later ones error rows (``duplicate item_id``).
* **JSON Lines** (MMAR): one record a line, decoded and parsed alone (:func:`jsonl_records`).
* **Audio paths** from a released file must stay under their root (:func:`leaves_root`): ``../../etc/passwd`` is
  the record's error row, never a file opened.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any, Iterator, Literal

from evalcore.core import jsonl, storage
from evalcore.datasets.base import BadItem

#: a JSON string, or one of the structural characters outside strings
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},]', re.DOTALL)
_OPEN, _CLOSE = {ord("["): ord("]"), ord("{"): ord("}")}, {ord("]"), ord("}")}


class Unreadable(BadItem):
    """Why one record of a released file could not be read (yielded in the record's place; validation makes it an
    error row)."""


class FileUnreadable(ValueError):
    """A released file that cannot be read at all: its message starts with the param that names it."""


def _why(e: BaseException) -> str:
    """A parse failure in a few words (never the record's text)."""
    if isinstance(e, UnicodeDecodeError):
        return f"not valid UTF-8 (byte 0x{e.object[e.start]:02x} at offset {e.start})"
    if isinstance(e, RecursionError):
        return "invalid JSON (nested too deeply)"
    if isinstance(e, json.JSONDecodeError):
        return f"invalid JSON ({e.msg})"
    return f"invalid JSON ({str(e).split(':')[0][:120]})"  # e.g. an integer of more than 4,300 digits


def _parse(raw: bytes) -> Any:
    return json.loads(raw.decode("utf-8"))


def _pairs(pairs: list[tuple[str, Any]]) -> Any:
    """``object_pairs_hook`` keeping a top-level object's duplicate keys (every object becomes a dict, which also
    remembers its pairs)."""
    out = _Object(pairs)
    out.pairs = pairs
    return out


class _Object(dict):
    pairs: list[tuple[str, Any]]


def json_records(raw: bytes, param: str, uri: str, want: Literal["list", "object"]
                 ) -> Iterator[tuple[str | None, Any]]:
    """(key or None, record or :class:`Unreadable`) of every top-level record of a released JSON file, in file
    order: the elements of a list (``want="list"``) or the members of an object, duplicate keys included
    (``want="object"``). Raises :class:`FileUnreadable` when the file cannot be read at all."""
    what = "a JSON list of records" if want == "list" else "a JSON object keyed by question id"
    if not raw.strip():
        raise FileUnreadable(f"{param}: {uri!r} is empty; it must hold {what}")
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_pairs if want == "object" else None)
    except (UnicodeDecodeError, ValueError, RecursionError):
        yield from _scanned(raw, param, uri, want, what)
        return
    if want == "list" and isinstance(data, list):
        yield from ((None, r) for r in data)
    elif want == "object" and isinstance(data, _Object):
        yield from data.pairs
    else:
        raise FileUnreadable(f"{param}: {uri!r} must hold {what}; it holds a JSON {type(data).__name__}")


def _scanned(raw: bytes, param: str, uri: str, want: str, what: str) -> Iterator[tuple[str | None, Any]]:
    """The records of a file that does not parse whole, each parsed alone (see the module docstring)."""
    start = len(raw) - len(raw.lstrip())
    top = raw[start:start + 1]
    if top != (b"[" if want == "list" else b"{"):
        raise FileUnreadable(f"{param}: {uri!r} is not {what} (it starts with {raw[start:start + 16]!r})")
    spans, begin, closed = [], start + 1, None
    stack: list[int] = []
    for m in _TOKEN.finditer(raw, start):
        c = m.group()[0]
        if c == ord('"'):
            continue
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in _CLOSE:
            if not stack or stack.pop() != c:
                raise FileUnreadable(f"{param}: {uri!r} is not {what} (unbalanced {chr(c)!r} at byte {m.start()})")
            if not stack:
                closed = m.start()
                break
        if c == ord(",") and len(stack) == 1:
            spans.append((begin, m.start()))
            begin = m.end()
    if closed is None:
        raise FileUnreadable(f"{param}: {uri!r} is cut short: its {'list' if want == 'list' else 'object'} never "
                             "closes (a truncated download?)")
    if raw[closed + 1:].strip():
        raise FileUnreadable(f"{param}: {uri!r} has data after its {what} (at byte {closed + 1})")
    if raw[begin:closed].strip() or spans:
        spans.append((begin, closed))
    for i, (a, b) in enumerate(spans):
        part = raw[a:b]
        try:
            if want == "list":
                yield None, _parse(part)
            else:
                ((key, value),) = _parse(b"{" + part + b"}").items()
                yield key, value
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            key = _key(part)
            yield key, Unreadable(f"record {i}{f' ({key!r})' if key else ''} of {uri}: {_why(e)}")


def _key(member: bytes) -> str | None:
    """The key of an object member ``"key": value`` when it reads as text (else None)."""
    m = re.match(rb'\s*"((?:[^"\\]|\\.){1,200})"\s*:', member)
    try:
        return json.loads(b'"' + m.group(1) + b'"') if m else None
    except ValueError:
        return None


def jsonl_records(raw: bytes, uri: str) -> Iterator[Any]:
    """Every record of a JSON Lines file, in order; a line that cannot be read comes back as its reason
    (:class:`Unreadable`); blank lines are skipped."""
    for n, line in jsonl.lines(raw):
        if not line.strip():
            continue
        try:
            yield _parse(line)
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            yield Unreadable(f"line {n} of {uri}: {_why(e)}")


def check_json(uri: str, param: str, want: Literal["list", "object", "lines"]) -> None:
    """Read a released JSON file as a run would and raise :class:`FileUnreadable` when it cannot be read at all
    (``evalcore validate``); one unreadable record is left to its error row."""
    raw = storage.read_bytes(uri)
    if want == "lines":
        if not raw.strip():
            raise FileUnreadable(f"{param}: {uri!r} is empty; it must hold one JSON record a line")
        if not any(not isinstance(r, Unreadable) for r in jsonl_records(raw, uri)):
            raise FileUnreadable(f"{param}: {uri!r} holds no line that reads as JSON")
        return
    for _ in json_records(raw, param, uri, want):
        pass


def leaves_root(relative: str) -> bool:
    """Whether a released relative path climbs out of the folder it is relative to (``../x``, ``a/../../x``)."""
    p = posixpath.normpath(relative.replace("\\", "/").lstrip("/"))
    return p == ".." or p.startswith("../")


def outside_root(root: str, relative: str) -> bool:
    """Whether ``relative`` under ``root`` leaves it: by its text (:func:`leaves_root`), or — on a local disk — by
    a symlink inside the root that leads out (the joined path resolved, symlinks and all, then checked against the
    resolved root: :func:`evalcore.core.storage.within`). Object-store keys have no symlinks: their text decides."""
    if leaves_root(relative):
        return True
    if storage.is_s3(root) or "://" in root and not root.startswith("file://"):
        return False
    return not storage.within(storage.join(root, relative.replace("\\", "/").lstrip("/")), root)

