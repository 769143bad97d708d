"""Markdown pieces the report's listening sections share: a section's opening and a table."""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd


def opening(title: str, *paragraphs: str) -> list[str]:
    """A section's lines up to its body: a blank line, ``## title``, then each paragraph after a blank line."""
    out = ["", f"## {title}"]
    for p in paragraphs:
        out += ["", p]
    return out + [""]


def ci(value: Any, low: Any, high: Any, signed: bool = False) -> str:
    """A figure with its CI as the listening sections print it (``0.903 [0.819, 0.972]``; ``signed``: a difference,
    ``+0.056 [+0.000, +0.111]``); the figure alone without a CI, ``n/a`` without a figure."""
    missing = [v is None or pd.isna(v) for v in (value, low)]
    f = "{:+.3f}" if signed else "{:.3f}"
    if missing[0]:
        return "n/a"
    return f.format(value) if missing[1] else f"{f.format(value)} [{f.format(low)}, {f.format(high)}]"


def table(header: list[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    """A Markdown table's lines (a ``|`` inside a cell escaped)."""
    def line(cells: Iterable[Any]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]
