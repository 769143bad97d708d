"""Regenerate docs/img/items.png, the picture of the item browser in docs/browser.md: the embedded demo's
``items.html`` on its multiple-choice items with the evidence of not listening, rendered by headless Chromium in a
1280 px wide window (its first 1000 px).

    .venv/bin/python scripts/items_screenshot.py              # runs the demo first (a few minutes on 2 cores)
    .venv/bin/python scripts/items_screenshot.py runs/demo    # an existing run root (its page is written again)

Needs ``chromium`` on PATH (Debian's package; ``.ci/run`` installs it for the tests).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from report_screenshot import run_demo

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "img" / "items.png"
VIEW = "p=mcq&ev=1"


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 1000) -> None:
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:  # the page loads its shards: give its scripts virtual time
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        f"--user-data-dir={profile}", "--hide-scrollbars", f"--window-size={width},{height}",
                        "--virtual-time-budget=10000", f"--screenshot={out}", page.resolve().as_uri() + "#" + VIEW],
                       check=True, capture_output=True, timeout=180)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", type=Path, help="a finished run's root (default: run the demo)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = a.run or Path(tmp) / "demo"
        if a.run is None:
            run_demo(root)
        else:
            subprocess.run([sys.executable, "-m", "evalcore.cli", "browse", str(root)], check=True)
        OUT.parent.mkdir(parents=True, exist_ok=True)
        screenshot(root / "items.html", OUT)
    print(OUT)


if __name__ == "__main__":
    main()
