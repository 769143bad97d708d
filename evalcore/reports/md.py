"""Markdown pieces the report's listening sections share: a section's opening and a table."""

from __future__ import annotations

from typing import Any, Iterable


def opening(title: str, *paragraphs: str) -> list[str]:
    """A section's lines up to its body: a blank line, ``## title``, then each paragraph after a blank line."""
    out = ["", f"## {title}"]
    for p in paragraphs:
        out += ["", p]
    return out + [""]


def table(header: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    """A Markdown table's lines (a ``|`` inside a cell escaped)."""
    def line(cells: Iterable[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]
