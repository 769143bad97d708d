"""Lines of a JSONL file, split on ``\\n`` only.

JSON strings may hold U+2028, U+2029, U+0085, form feeds and other characters that
``str.splitlines()`` treats as line ends, so splitting decoded text that way breaks one row into
several. Every JSONL reader of evalcore splits the raw bytes on ``b"\\n"`` here instead (a ``\\r`` left
at a line's end is JSON whitespace).
"""

from __future__ import annotations

from typing import Iterator

__all__ = ["lines"]


def lines(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw line) of every line of ``data``, blank ones included."""
    yield from enumerate(data.split(b"\n"), 1)
