"""The command blocks of README.md (and of docs pages) that tests run as written: the fenced ``bash`` block right after
``<!-- NAME -->``."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_block(marker: str, page: Path = README) -> str:
    """The text of the ```bash block that follows ``<!-- marker -->`` in ``page`` (README.md; the test fails if
    none)."""
    m = re.search(rf"<!-- {re.escape(marker)} -->\n```bash\n(.*?)```", page.read_text(), re.S)
    assert m, f"{page.name} has no block marked <!-- {marker} -->"
    return m.group(1)
