"""evalcore's layers as a contract: `lint-imports` with the repository's .importlinter (every import, inside
functions too). An import that runs the wrong way fails here as well as in .ci/run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(exe), "--config", str(REPO / ".importlinter")], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout and "the data flow" in proc.stdout
