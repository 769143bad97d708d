"""The README's command blocks that tests run as written: the fenced ``bash`` block right after ``<!-- NAME -->``."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_block(marker: str) -> str:
    """The text of the ```bash block that follows ``<!-- marker -->`` in README.md (the test fails if none)."""
    m = re.search(rf"<!-- {re.escape(marker)} -->\n```bash\n(.*?)```", README.read_text(), re.S)
    assert m, f"README.md has no block marked <!-- {marker} -->"
    return m.group(1)
