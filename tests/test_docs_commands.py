"""Command blocks of the docs that a newcomer copies: docs/nightly.md's first block (after ``<!-- nightly-demo -->``)
puts the venv's ``bin/`` on PATH before anything else, uses no command but ``evalcore`` after it (no ``xdg-open``,
no bare ``python``), and every ``evalcore`` line parses (its command and options exist: ``--help`` exits 0). The
commands themselves run end to end in tests/test_nightly_demo.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from evalcore.cli import app

REPO = Path(__file__).resolve().parents[1]


def doc_block(doc: str, marker: str) -> list[str]:
    """The command lines (comments and blank lines left out) of the ```bash block after ``<!-- marker -->``."""
    m = re.search(rf"<!-- {re.escape(marker)} -->\n```bash\n(.*?)```", (REPO / "docs" / doc).read_text(), re.S)
    assert m, f"docs/{doc} has no block marked <!-- {marker} -->"
    return [ln.split("  #")[0].strip() for ln in m.group(1).splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_nightly_demo_block_runs_with_the_venvs_path() -> None:
    lines = doc_block("nightly.md", "nightly-demo")
    assert lines[0] == 'export PATH="$PWD/.venv/bin:$PATH"'
    words = [shlex.split(ln) for ln in lines[1:]]
    assert {w[0] for w in words} == {"evalcore"}, lines
    for w in words:
        res = CliRunner().invoke(app, [*w[1:], "--help"])
        assert res.exit_code == 0, (w, res.output)
