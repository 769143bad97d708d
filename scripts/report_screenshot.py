"""Regenerate docs/img/report.png, the README's picture of the report: the embedded demo's ``report.html``
rendered by headless Chromium in a 1280 px wide window (its first 1000 px).

    .venv/bin/python scripts/report_screenshot.py              # runs the demo first (a few minutes on 2 cores)
    .venv/bin/python scripts/report_screenshot.py runs/demo    # an existing run root holding report.html

Needs ``chromium`` on PATH (Debian's package; ``.ci/run`` installs it for the tests).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "img" / "report.png"
WIDTH, HEIGHT = 1280, 1000


def run_demo(root: Path) -> None:
    """``evalcore run`` of the embedded demo into ``root`` (this interpreter's evalcore, quietly)."""
    subprocess.run([sys.executable, "-m", "evalcore.cli", "run", "--out", str(root), "--quiet"], check=True)


def screenshot(page: Path, out: Path) -> None:
    """``page`` rendered in a WIDTH × HEIGHT headless Chromium window, saved as PNG at ``out``."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
                        f"--screenshot={out}", page.resolve().as_uri()], check=True, capture_output=True, timeout=180)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", help="a finished run's root (default: run the demo into a temporary one)")
    ap.add_argument("--out", default=str(OUT), help=f"where the PNG goes (default {OUT.relative_to(REPO)})")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.run) if a.run else Path(tmp) / "demo"
        if not a.run:
            run_demo(root)
        screenshot(root / "report.html", Path(a.out))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
