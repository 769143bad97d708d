"""Regenerate docs/img/model-card.png, the picture of the model card in docs/cmi-bench.md: the card of a music-card
run over the test fixtures (``configs/benchmarks/music-card.yaml`` localized as tests/test_benchmark_configs.py does:
two items a task), with stand-in models named as a user names the models they stand for — each benchmark's stand-in
is ``qwen2-audio-7b-instruct`` (``models[].model``: one column), beside the weight-free ``listener`` and
``text-prior`` — rendered by headless Chromium in a 1280 px window, the card section cut from the page.

    .venv/bin/python scripts/model_card_screenshot.py              # runs the card first (a few minutes on 2 cores)
    .venv/bin/python scripts/model_card_screenshot.py RUN_ROOT     # an existing run root holding report.html

Needs ``chromium`` on PATH (Debian's package; ``.ci/run`` installs it for the tests).
"""

from __future__ import annotations

import argparse
import base64
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "img" / "model-card.png"
sys.path.insert(0, str(REPO / "tests"))  # the fixtures' localized config and the DevTools client of the tests


def run_card(out: Path) -> Path:
    """The music card over the fixtures, without the test's dead benchmark; returns its run root."""
    from test_benchmark_configs import _localized

    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.run import run

    cfg = parse_config(_localized(out, dead=False))
    run(cfg)
    return Path(cfg.root)


#: the card's box on the page: from its heading to the next section's
CLIP = """(() => {
  const hs = [...document.querySelectorAll('h2')];
  const i = hs.findIndex(h => h.textContent === 'Model card');
  const top = hs[i].getBoundingClientRect().top + scrollY - 8;
  const end = hs[i + 1].getBoundingClientRect().top + scrollY - 8;
  return {x: 0, y: top, width: document.documentElement.scrollWidth, height: end - top, scale: 1};
})()"""


def screenshot(page: Path, out: Path) -> None:
    """The card section of ``page`` in a 1280 px headless Chromium, saved as PNG at ``out``."""
    from cdp import Chromium

    with tempfile.TemporaryDirectory() as profile, Chromium(Path(profile), 1280, 900) as browser:
        tab = browser.page(page.resolve().as_uri())
        tab.wait("document.readyState === 'complete'")
        clip = tab.eval(CLIP)
        shot = tab.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        out.write_bytes(base64.b64decode(shot["data"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", help="a finished music-card run's root (default: run it into a temporary one)")
    ap.add_argument("--out", default=str(OUT), help=f"where the PNG goes (default {OUT.relative_to(REPO)})")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.run) if a.run else run_card(Path(tmp))
        screenshot(root / "report.html", Path(a.out))
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
