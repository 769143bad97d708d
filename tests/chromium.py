"""Headless Chromium for the page tests: a page's layout width at a given window size, and screenshots.

:func:`widths` loads a copy of the page with one probe script appended (the pages themselves carry no
scripts) that writes ``document.documentElement.scrollWidth`` and ``clientWidth`` into the DOM after
layout; Chromium dumps the DOM and the test reads both back. Pages overflow horizontally exactly when the
scroll width exceeds the client width.
"""

from __future__ import annotations

import html
import json
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


#: JavaScript of :func:`layout`: each header's and confidence interval's text split where Chromium broke its lines
#: (a character whose box starts lower than the previous one's opens a line), and each image's natural and shown
#: width
LAYOUT = """
const lines = (el) => {
  const out = [[]]; let top = null;
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) {
    const t = walk.currentNode;
    for (let i = 0; i < t.length; i++) {
      const r = document.createRange(); r.setStart(t, i); r.setEnd(t, i + 1);
      const box = r.getClientRects()[0];
      if (!box) continue;  // collapsed white space
      if (box.width === 0) { out[out.length - 1].push(t.data[i]); continue; }  // a space hanging at a line's end
      if (top !== null && box.top > top + 2) out.push([]);
      top = box.top; out[out.length - 1].push(t.data[i]);
    }
  }
  return out.map(a => a.join(''));
};
return {headers: [...document.querySelectorAll('th')].map(lines),
        cis: [...document.querySelectorAll('.ci, .ci-off')].map(lines),
        images: [...document.querySelectorAll('img')].map(i => [i.naturalWidth, i.clientWidth])};
"""


def layout(page: Path, tmp: Path, width: int = 1280) -> dict:
    """What :data:`LAYOUT` reads of ``page`` laid out in a ``width`` px window: ``headers`` and ``cis`` (each a list
    of its lines' text) and ``images`` ([natural width, shown width] each)."""
    probe = tmp / f"layout-{page.name}"
    script = ("<script>window.addEventListener('load', () => {document.body.setAttribute('data-layout', "
              f"JSON.stringify((() => {{{LAYOUT}}})()));}});</script>")
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    dom = dump_dom(probe, tmp / "profile-layout", width)
    found = re.search(r'data-layout="([^"]*)"', dom)
    assert found, "the layout probe did not run"
    return json.loads(html.unescape(found.group(1)))


def mid_word_breaks(lines_of: list[list[str]]) -> list[str]:
    """The line breaks that fall inside a word: a line that ends in a letter, digit or underscore followed by one
    that starts with a letter or digit (a break at a space, or before the underscore joining two words, is fine)."""
    bad = []
    for lines in lines_of:
        for a, b in zip(lines, lines[1:]):
            if a and b and (a[-1].isalnum() or a[-1] == "_") and b[0].isalnum():
                bad.append(f"{a!r} | {b!r}")
    return bad
