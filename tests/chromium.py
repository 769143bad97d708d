"""Headless Chromium for the page tests: a page's layout width at a given window size, and screenshots.

:func:`widths` loads a copy of the page with one probe script appended (the pages themselves carry no
scripts) that writes ``document.documentElement.scrollWidth`` and ``clientWidth`` into the DOM after
layout; Chromium dumps the DOM and the test reads both back. Pages overflow horizontally exactly when the
scroll width exceeds the client width.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
PROBE = ("<script>window.addEventListener('load', () => {const e = document.documentElement;"
         "document.body.setAttribute('data-scroll-width', e.scrollWidth);"
         "document.body.setAttribute('data-client-width', e.clientWidth);});</script>")


def require() -> str:
    """The Chromium binary; skips without it, except under CI=true (where .ci/run installs it)."""
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing (.ci/run installs it)")
        pytest.skip("chromium is not installed")
    return CHROMIUM


def _flags(tmp: Path, width: int, height: int) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", f"--user-data-dir={tmp}",
            f"--window-size={width},{height}"]


def dump_dom(page: Path, tmp: Path, width: int = 1280, height: int = 900) -> str:
    return subprocess.run([require(), *_flags(tmp, width, height), "--virtual-time-budget=5000", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=120, check=True).stdout


def widths(page: Path, tmp: Path, width: int = 1280) -> tuple[int, int]:
    """(scroll width, client width) of ``page`` laid out in a ``width`` px window."""
    probe = tmp / f"probe-{page.name}"
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = dump_dom(probe, tmp / "profile", width)
    found = dict(re.findall(r'data-(scroll|client)-width="(\d+)"', dom))
    assert set(found) == {"scroll", "client"}, "the probe did not run"
    return int(found["scroll"]), int(found["client"])


def screenshot(page: Path, out: Path, tmp: Path, width: int = 1280, height: int = 900) -> Path:
    subprocess.run([require(), *_flags(tmp / "profile", width, height), f"--screenshot={out}", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    return out
