"""The papers' own text, for tests that hold evalcore to it.

The text files lie beside the clone (``../shared/papers``, or ``EVALCORE_PAPERS_DIR``), as in
tests/test_published_values.py; a test that needs one skips when it is absent. :func:`flat` is the only
normalisation allowed before comparing strings: runs of whitespace (line breaks and tabs of the PDF text
extraction) become one space — nothing else (case, punctuation, quotes) is touched. :func:`glyphs` is the one
exception, for symbols: the extraction writes a few printed glyphs as LaTeX commands (the factual paper's arrows
"→" as ``\\rightarrow``), and a prompt that quotes the paper sends the glyph.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

PAPERS_ENV = "EVALCORE_PAPERS_DIR"
PAPERS_DIR = Path(os.environ.get(PAPERS_ENV) or Path(__file__).resolve().parents[2] / "shared" / "papers")
FACTUAL = "factual-and-musical-metrics-for-music-lms.txt"


def flat(text: str) -> str:
    """``text`` with every run of whitespace as one space (the text extraction's line breaks and tabs)."""
    return re.sub(r"\s+", " ", text).strip()


#: LaTeX commands of the text extraction → the glyph the PDF prints (only those a quoted string needs)
GLYPHS = {"\\rightarrow": "→"}


def glyphs(text: str) -> str:
    """``text`` with the extraction's LaTeX glyph commands (:data:`GLYPHS`) as the printed glyphs, each command
    with the spaces the extraction put around it ("X \\rightarrow Y" → "X → Y")."""
    for command, glyph in GLYPHS.items():
        text = re.sub(rf" ?{re.escape(command)} ?", f" {glyph} ", text)
    return text


def squash(text: str) -> str:
    """``text`` without any whitespace: for a prompt the text extraction printed with tabs inside its words or
    braces ("Between {\ttwo composers}\t, whose …"); still whitespace only."""
    return re.sub(r"\s+", "", text)


def paper(name: str = FACTUAL) -> str:
    """A paper's text as extracted (skips the test when the file is not there)."""
    path = PAPERS_DIR / name
    if not path.is_file():
        pytest.skip(f"the paper's text not found at {path} (set {PAPERS_ENV})")
    return path.read_text(encoding="utf-8")
