"""dashboard.html rendered by headless Chromium: the page is not blank, opens with the flagged regressions and
every image is a decodable PNG (no broken image). Skips without Chromium, except under CI=true."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from evalcore.reports.trends import dashboard

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def _history() -> pd.DataFrame:
    out = []
    for pos, ck in enumerate(["step-1000", "step-2000", "step-3000"]):
        deaf, rows = ck == "step-3000", []
        for cond, v in {"correct": 0.3 if deaf else 0.95, "random": 0.3, "noise": 0.0, "silence": 0.0}.items():
            rows.append({"protocol": "mcq", "protocol_kind": "mcq", "dataset": "synth", "model": "listener",
                         "condition": cond, "variant": "default", "group": "all", "kind": "value",
                         "metric": "accuracy", "value": v, "ci_low": max(v - 0.1, 0), "ci_high": min(v + 0.1, 1),
                         "n": 16, "definition": "share correct"})
        for task in ("instrument_mcq", "tempo"):
            v = 0.25 if deaf and task == "instrument_mcq" else 0.9
            rows.append({**rows[0], "group": f"task={task}", "value": v, "ci_low": v - 0.1, "ci_high": v + 0.05})
        rows.append({**rows[0], "protocol": "factual", "protocol_kind": "factual", "metric": "f1_micro",
                     "value": 0.0 if deaf else 1.0, "ci_low": 0.0 if deaf else 0.9, "ci_high": 0.05 if deaf else 1.0})
        rows.append({**rows[-1], "condition": "correct-random", "kind": "paired_diff", "value": 0.0 if deaf else 0.6})
        out += [{**r, "series": "listener", "checkpoint": ck, "position": pos} for r in rows]
    return pd.DataFrame(out)


def _regressions() -> pd.DataFrame:
    return pd.DataFrame([{"series": "listener", "checkpoint": "step-3000", "reference": "step-2000",
                          "protocol": "factual", "dataset": "synth", "condition": "correct", "variant": "default",
                          "metric": "f1", "group": "all", "delta": -1.0, "ci_low": -1.0, "ci_high": -1.0,
                          "p_adjusted": 0.0, "flagged": True}])


def test_dashboard_renders_in_headless_chromium_with_no_broken_image(tmp_path) -> None:
    if CHROMIUM is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing (.ci/run installs it)")
        pytest.skip("chromium is not installed")
    import matplotlib.image as mpimg

    html, md = dashboard("demo", _regressions(), _history(), [{"series": "listener", "checkpoint": "step-3000",
                                                               "status": "finished", "attempts": 1}], ["a note"])
    page = tmp_path / "dashboard.html"
    page.write_text(html)
    assert "| listener | step-3000 | step-2000 | factual |" in md
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert dom.index("Flagged regressions") < dom.index("Series listener")  # opens with the flags
    srcs = re.findall(r'<img src="([^"]+)"', dom)
    assert len(srcs) == 3  # headline trend, correct vs controls, MCQ per task
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        img = mpimg.imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
        assert img.shape[0] > 100 and img.shape[1] > 100 and np.std(img) > 0.01  # decodes, and is not blank
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    pixels = mpimg.imread(str(shot))
    assert pixels.std() > 0.02 and (pixels[..., :3].mean(axis=2) < 0.5).mean() > 0.002  # text and plots drawn
