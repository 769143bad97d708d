"""The nightly's morning page (dashboard.html) in headless Chromium: it opens with tonight's verdicts, then the
checkpoint × metric matrix, the leaderboard, the plots and the folded comparisons (flagged rows first); no
table makes it wider than a 1280 px window; every image is a decodable PNG. Skips without Chromium, except
under CI=true."""

from __future__ import annotations

import base64
import io
import os
import re

import numpy as np
import pandas as pd
import pytest

import chromium
from evalcore.core.nightly_outcome import CheckpointKey, CheckpointVerdict, Counts, LedgerRecord, Status, Tonight, Verdict
from evalcore.reports.dashboard import render


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
    """Every comparison of step-3000 and step-2000 against step-2000 / step-1000 (+ the baseline), the deaf
    step-3000's correct-condition drops flagged: the wide table the page must fold and wrap."""
    rows = []
    for ck, ref, role in (("step-2000", "step-1000", "previous+baseline"), ("step-3000", "step-2000", "previous"),
                          ("step-3000", "step-1000", "baseline")):
        deaf = ck == "step-3000"
        for cond in ("correct", "random", "noise", "correct-random", "correct-noise"):
            for metric, group in (("accuracy", "all"), ("accuracy", "task=instrument_mcq_long_name"),
                                  ("f1", "all"), ("recall_micro_with_errors", "all")):
                delta = -0.512 if deaf and cond.startswith("correct") else 1.33e-05
                rows.append({"series": "listener", "checkpoint": ck, "reference": ref, "reference_role": role,
                             "protocol": "factual" if metric != "accuracy" else "mcq", "dataset": "synth",
                             "condition": cond, "variant": "default", "metric": metric, "group": group,
                             "direction": "higher" if cond.startswith("correct") else "none", "n": 16,
                             "reference_value": 0.95, "value": 0.95 + delta, "delta": delta,
                             "ci_low": delta - 0.1, "ci_high": delta + 0.05, "p_value": 1e-6 if deaf else 0.9,
                             "p_adjusted": 3.2e-5 if deaf else 1.0, "correction": "holm", "min_effect": 0.05,
                             "flagged": bool(deaf and cond.startswith("correct")), "improved": False})
    return pd.DataFrame(rows)


def _tonight() -> Tonight:
    """Tonight: step-3000 regressed (its verdict, drops and why as the nightly computes them from the comparisons:
    12 drops, each flagged against the previous checkpoint and against the baseline), one failed, one waiting."""
    from evalcore.nightly import tonight as tn

    key = CheckpointKey("listener", "step-3000")
    verdict, flagged, _ = tn.checkpoint_verdict(key, _regressions())
    return Tonight("demo", "2026-11-27T03:00:00Z", "/runs/demo", [
        CheckpointVerdict("listener", "step-3000", verdict, "no", flagged, reason=tn.why(key, _regressions()),
                          run_root="/runs/x"),
        CheckpointVerdict("listener", "step-4000", Verdict.FAILED, reason="ConfigError: " + "x" * 400),
        CheckpointVerdict("listener", "step-5000", Verdict.WAITING, reason="not ready: no _SUCCESS marker")],
        Counts(evaluated=1, failed=1, waiting=1, requests_sent=384), None, 3)


def _board() -> pd.DataFrame:
    from evalcore.nightly.leaderboard import COLUMNS

    return pd.DataFrame([
        {"suite_fingerprint": "f", "series": "listener", "checkpoint": "step-3000", "leader": "other",
         "protocol": "mcq", "dataset": "synth", "variant": "default", "metric": "accuracy", "n": 16, "value": 0.3,
         "leader_value": 0.9, "delta": -0.6, "ci_low": -0.7, "ci_high": -0.5, "p_adjusted": 1e-4},
        {"suite_fingerprint": "f", "series": "other", "checkpoint": "step-9", "leader": "other", "protocol": "mcq",
         "dataset": "synth", "variant": "default", "metric": "accuracy", "n": None, "value": 0.9,
         "leader_value": 0.9, "delta": 0.0, "ci_low": 0.0, "ci_high": 0.0, "p_adjusted": None}], columns=COLUMNS)


@pytest.mark.e2e  # headless Chromium
def test_the_morning_page_opens_with_tonight_and_fits_a_1280_px_window(tmp_path) -> None:
    import matplotlib.image as mpimg

    chromium.require()
    records = [LedgerRecord("listener", c, s, attempts=1, reason=r)
               for c, s, r in (("step-1000", Status.FINISHED, None), ("step-3000", Status.FINISHED, None),
                               ("step-4000", Status.FAILED, "ConfigError: " + "y" * 600))]
    html, md = render(_tonight(), _regressions(), _history(), records, ["a note"], _board())
    page = tmp_path / "dashboard.html"
    page.write_text(html)
    assert md.startswith("# Nightly: demo — 2026-11-27\n\n## Tonight")
    # 24 flagged comparison rows, 12 drops: each counted once, with what it was flagged against
    assert "| **listener/step-3000** | **▼\u00a0regressed** | **no** | **12** | **12 drop(s) flagged (12 vs the " \
           "previous checkpoint step-2000, 12 vs the baseline step-1000); largest: " in md
    assert "1.33e-05" not in html and "3.2e-05" not in html and "&lt; 0.001" in html  # numbers people can read
    dom = chromium.dump_dom(page, tmp_path / "profile")
    order = [dom.index(s) for s in ("Tonight", "checkpoints × headline metrics", "Leaderboard", "<img",
                                    "Comparisons", "Checkpoints</h2>")]
    assert order == sorted(order), order  # tonight first, then the matrix, the board, the plots, the details
    # the deaf checkpoint's comparisons: flagged rows first, its details open (tonight), the others folded
    assert dom.count("<details open") == 2 and dom.count("<details") == 3
    first_rows = re.findall(r'<tr class="(\w*)">', dom[dom.index("<details open"):])[:3]
    assert first_rows == ["flag"] * 3
    scroll, client = chromium.widths(page, tmp_path)
    assert client == 1280 - 0 or client > 1200
    assert scroll <= client, f"the page overflows a 1280 px window: scroll width {scroll} > {client}"
    srcs = re.findall(r'<img src="([^"]+)"', dom)
    assert len(srcs) == 4  # leaderboard, headline trend, correct vs controls, MCQ per task
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        img = mpimg.imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
        assert img.shape[0] > 100 and img.shape[1] > 100 and np.std(img) > 0.01  # decodes, and is not blank
    shot = chromium.screenshot(page, tmp_path / "shot.png", tmp_path, 1280, 900)
    pixels = mpimg.imread(str(shot))
    assert pixels.std() > 0.02 and (pixels[..., :3].mean(axis=2) < 0.5).mean() > 0.002  # text and plots drawn
    if os.environ.get("EVALCORE_KEEP_SHOTS"):  # for a person to look at
        import shutil as sh

        sh.copy(shot, os.environ["EVALCORE_KEEP_SHOTS"])
        sh.copy(page, os.environ["EVALCORE_KEEP_SHOTS"])


@pytest.mark.e2e  # headless Chromium
def test_the_compare_page_puts_flagged_rows_first_and_fits_1280_px(tmp_path) -> None:
    """The page `evalcore compare` writes (same helpers): flagged first and highlighted, numbers formatted, no
    horizontal overflow; and a store without conditional writes is named in the Tonight block."""
    from evalcore.reports.html import markdown_html, page
    from evalcore.reports.tables_html import comparison_rows, table_html

    rows = _regressions()
    rows = rows[rows["checkpoint"] == "step-3000"].iloc[::-1]  # flagged rows last on input
    shown = comparison_rows(rows)
    assert [r["_class"] for r in shown[:3]] == ["flag"] * 3 and shown[-1]["_class"] == ""
    assert shown[0]["p (Holm)"] == "< 0.001" and shown[0]["difference [CI]"] == "-0.512 [-0.612, -0.462]"
    path = tmp_path / "compare.html"
    path.write_text(page("b vs a", markdown_html("# b vs a\n\n12 of 40 flagged") + table_html(shown)))
    scroll, client = chromium.widths(path, tmp_path)
    assert scroll <= client, f"the compare page overflows: {scroll} > {client}"

    t = _tonight()
    t.store = "the store ignored If-None-Match"
    _, md = render(t, _regressions(), _history(), [], [], _board().iloc[0:0])
    assert "Leases are not atomic on this store (the store ignored If-None-Match)" in md
