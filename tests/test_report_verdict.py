"""The report's verdict per model (does it listen?), its interval labels and the plots of report.html, on
multiple-choice runs built by hand: a model that answers from the audio, one that answers the same whatever
it hears, with 2 and with 30 questions."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess

import pandas as pd
import pytest

from evalcore.runconfig.config import ConfigError, demo_config_path, load_config, parse_config
from evalcore.reports import markdown, plots, report_html
from evalcore.scoring.requests import per_item_table
from evalcore.scoring.summary import summary_table
from evalcore.reports.verdict import interval_label, listening_rows, section, verdict_lines, verdicts

OPTIONS = ["calm", "tense", "loud", "polka"]


def mcq_rows(n_questions: int, lucky: int = 0) -> list[dict]:
    """``listener`` answers right with the correct audio, and with noise only on the questions q with
    q % 3 == ``lucky``; ``deaf`` always answers the first option (right on even questions, in both conditions)."""
    rows = []
    for q in range(n_questions):
        correct = q % 2  # the right option: 0 or 1
        for model in ("listener", "deaf"):
            for cond in ("correct", "noise"):
                if model == "deaf":
                    parsed = 0
                else:
                    parsed = correct if cond == "correct" or q % 3 == lucky else 3
                rows.append({
                    "request_id": f"{model}-{cond}-q{q}", "dataset": "synth", "item_id": f"q{q}", "protocol": "mcq",
                    "model": model, "condition": cond, "variant": "default", "option_order": 0, "task": "mcq",
                    "category": "harmony" if q % 2 else "rhythm", "difficulty": None, "audio_item_id": f"q{q}",
                    "text": "…", "options": OPTIONS, "correct_index": correct, "parsed_index": parsed,
                    "judge": "mcq_string@1", "metadata": json.dumps({}), "error": None,
                })
    return rows


def summary_of(n_questions: int, lucky: int = 0) -> pd.DataFrame:
    per_item = per_item_table(mcq_rows(n_questions, lucky))
    return markdown.with_kinds(summary_table(per_item, resamples=300, confidence=0.95, seed=0).to_pandas())


@pytest.fixture(scope="module")
def two() -> pd.DataFrame:
    return summary_of(2, lucky=2)  # the listener fails both questions with noise


@pytest.fixture(scope="module")
def thirty() -> pd.DataFrame:
    return summary_of(30)


COUNTS = {"items_in": 0, "items_valid": 0, "items_errored": 0, "requests_in": 0, "requests_scored": 0,
          "requests_errored": 0}


def test_interval_labels() -> None:
    assert interval_label(0.5, 0.2, 0.8, 30) == "CI > 0"
    assert interval_label(-0.5, -0.8, -0.2, 30) == "CI < 0"
    assert interval_label(0.1, -0.1, 0.3, 30) == "CI includes 0"
    assert interval_label(0.5, 0.2, 0.8, 2) == "too few items (n=2 < 20)"
    assert interval_label(0.5, 0.2, 0.8, 2, min_items=2) == "CI > 0"
    zero = interval_label(0.0, 0.0, 0.0, 30)
    assert zero.startswith("degenerate [0.000, 0.000]") and "includes" not in zero and "no difference" in zero
    # every paired difference the same nonzero value at n >= min_items: plain evidence, not "degenerate"
    assert interval_label(1.0, 1.0, 1.0, 30) == "all items differ by the same amount (+1.000 each)"
    assert interval_label(-0.25, -0.25, -0.25, 20) == "all items differ by the same amount (-0.250 each)"
    assert interval_label(1.0, 1.0, 1.0, 19).startswith("too few items")
    assert interval_label(float("nan"), float("nan"), float("nan"), 30) == "n/a"


def test_two_items_give_no_yes_and_no_ci_above_zero(two: pd.DataFrame) -> None:
    rows = listening_rows(two)
    lst = rows[rows["model"] == "listener"].iloc[0]
    assert lst.n == 2 and lst.ci_low == 1.0  # the bootstrap alone would call this "CI > 0"
    found = {v.model: v for v in verdicts(two)}
    assert found["listener"].listens == "unclear" and found["deaf"].listens == "unclear"
    lines = verdict_lines(two)
    assert lines[0].startswith("deaf: listens unclear") and lines[1].startswith("listener: listens unclear")
    assert all("too few items (n=2 < 20)" in ln and "CI > 0" not in ln for ln in lines)
    report = markdown.render({"name": "tiny", "confidence": 0.95}, COUNTS, two, pd.DataFrame())
    assert "CI > 0" not in report and "listens: **yes**" not in report
    assert "too few items (n=2 < 20)" in report


def test_verdicts_with_enough_items(thirty: pd.DataFrame) -> None:
    found = {v.model: v for v in verdicts(thirty)}
    yes, no = found["listener"], found["deaf"]
    assert yes.listens == "yes" and len(yes.deciding) == 1  # one protocol instance: one deciding difference
    r = yes.deciding[0]
    assert r.condition == "correct-noise" and r.metric == "accuracy" and r.n == 30 and r.ci_low > 0
    assert r.value == pytest.approx(20 / 30)  # right on all 30, with noise on the 10 questions q % 3 == 0
    assert no.listens == "no" and no.deciding[0].ci_low == no.deciding[0].ci_high == 0
    assert "degenerate [0.000, 0.000]" in no.because() and "CI includes 0" not in no.because()
    # the same run judged with a minimum above its 30 questions: nothing decides
    assert {v.listens for v in verdicts(thirty, min_items=31)} == {"unclear"}
    # a model named without any difference (e.g. only correct audio was run) is unclear, not left out
    assert verdicts(thirty, models=["solo"])[-1].listens == "unclear"


def test_report_opens_with_the_verdict(thirty: pd.DataFrame) -> None:
    report = markdown.render({"name": "t", "confidence": 0.95, "min_items": 20}, COUNTS, thirty, pd.DataFrame())
    headings = [ln for ln in report.splitlines() if ln.startswith("## ")]
    assert headings[0] == "## Does it listen?" and headings[1] == "## Counts"
    top = report.split("## Counts", 1)[0]
    assert "* **listener** — listens: **yes**" in top and "* **deaf** — listens: **no**" in top
    assert "mcq · synth accuracy correct − noise +0.667 [" in top and "n=30 — CI > 0" in top
    assert "`stats.min_items` (20)" in top and "**n** counts items" in top
    # the minimum comes from the run's metadata (stats.min_items)
    strict = markdown.render({"name": "t", "confidence": 0.95, "min_items": 50}, COUNTS, thirty, pd.DataFrame())
    assert "listens: **unclear**" in strict and "too few items (n=30 < 50)" in strict
    assert section(thirty.iloc[0:0], 95) == []


def test_min_items_is_configurable_and_checked() -> None:
    data = json.loads(json.dumps(load_config(demo_config_path()).model_dump(mode="json")))
    assert load_config(demo_config_path()).stats.min_items == 20
    data["stats"] = {"min_items": 5}
    assert parse_config(data).stats.min_items == 5
    for bad in (0, "many"):
        data["stats"] = {"min_items": bad}
        with pytest.raises(ConfigError, match="stats.min_items"):
            parse_config(data)


def test_plots(thirty: pd.DataFrame) -> None:
    fig = plots.forest(listening_rows(thirty))
    assert fig is not None and len(fig.axes[0].get_yticklabels()) == 2
    assert plots.attention_bars(thirty) is not None
    cat = plots.breakdown_bars(thirty, "category")
    assert cat is not None and [t.get_text() for t in cat.axes[0].get_xticklabels()] == ["harmony", "rhythm"]
    assert plots.breakdown_bars(thirty, "genre") is None
    assert plots.forest(thirty.iloc[0:0]) is None and plots.attention_bars(thirty.iloc[0:0]) is None
    page = report_html.render(markdown.render({"name": "t", "confidence": 0.95}, COUNTS, thirty, pd.DataFrame()),
                              thirty)
    assert page.count('<img src="data:image/png;base64,') == 3 and "<h2>Does it listen?</h2>" in page
    assert 'listens: <strong class="verdict-yes">yes</strong>' in page
    assert 'listens: <strong class="verdict-no">no</strong>' in page
    assert page.index("<h2>Does it listen?</h2>") < page.index("<img") < page.index("<h2>Counts</h2>")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_PROBE = """<img id="broken-control" src="data:image/png;base64,AAAA" alt="control">
<script>
window.addEventListener("load", () => {
  const seen = [...document.images].map(i => (i.complete && i.naturalWidth > 0) ? i.naturalWidth + "x" + i.naturalHeight
                                                                                   : "broken");
  document.body.setAttribute("data-images", seen.join(","));
});
</script>
</body>"""


def _chromium(tmp_path, *args: str) -> str:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=10000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=True).stdout


@pytest.mark.e2e  # headless Chromium
def test_report_html_renders_in_chromium(thirty: pd.DataFrame, tmp_path) -> None:
    """report.html in headless Chromium: the page has its text, every image decodes (PNG, in Python and in the
    browser; a broken control image shows the browser check can fail) and the screenshot is not blank."""
    if CHROMIUM is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI must run the Chromium test: .ci/run installs Debian's chromium")
        pytest.skip("chromium not installed (Debian package chromium; .ci/run installs it)")
    from PIL import Image

    page = report_html.render(markdown.render({"name": "t", "confidence": 0.95}, COUNTS, thirty, pd.DataFrame()),
                              thirty)
    (tmp_path / "report.html").write_text(page, encoding="utf-8")
    srcs = re.findall(r'<img src="([^"]+)"', page)
    assert len(srcs) == 3
    for src in srcs:
        head, data = src.split(",", 1)
        assert head == "data:image/png;base64"
        img = Image.open(io.BytesIO(base64.b64decode(data)))
        img.load()
        assert img.format == "PNG" and img.width > 100 and img.height > 100
    (tmp_path / "probe.html").write_text(page.replace("</body>", _PROBE), encoding="utf-8")
    dom = _chromium(tmp_path, "--dump-dom", (tmp_path / "probe.html").as_uri())
    assert "Does it listen?" in dom and 'listens: <strong class="verdict-yes">yes</strong>' in dom
    seen = re.search(r'data-images="([^"]*)"', dom).group(1).split(",")
    assert len(seen) == 4 and seen[-1] == "broken"  # the three report images, then the control
    assert all(re.fullmatch(r"\d+x\d+", s) for s in seen[:3]), seen
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1000,1600", (tmp_path / "report.html").as_uri())
    pixels = Image.open(shot).convert("L")
    dark = sum(pixels.histogram()[:200]) / (pixels.width * pixels.height)
    assert 0.01 < dark < 0.9, dark  # text and figures on a white page, neither blank nor black


def test_nothing_scored_has_no_verdict() -> None:
    assert verdicts(pd.DataFrame()) == [] and section(pd.DataFrame(), 95) == []
    assert verdicts(pd.DataFrame(), models=["m"])[0].listens == "unclear"
    report = markdown.render({"name": "t"}, COUNTS, pd.DataFrame(), pd.DataFrame())
    assert "No request was scored." in report and "Does it listen?" not in report


def test_primary_metric_per_protocol() -> None:
    def row(protocol: str, kind: str, metric: str, lo: float, n: int = 40) -> dict:
        return {"protocol": protocol, "protocol_kind": kind, "dataset": "d", "model": "m", "variant": "default",
                "group": "all", "condition": "correct-random", "kind": "paired_diff", "metric": metric,
                "value": lo + 0.1, "ci_low": lo, "ci_high": lo + 0.2, "n": n}

    summary = pd.DataFrame([
        row("mcq", "mcq", "ifr", 0.3), row("mcq", "mcq", "accuracy", -0.05),  # accuracy decides, not ifr
        row("ff", "freeform", "meteor", 0.02), row("ff", "freeform", "rouge", -0.1),  # no bleu: the first metric
        row("other", "factual", "precision_micro", 0.5),  # no primary metric: not read
    ])
    rows = listening_rows(summary)
    assert sorted(zip(rows["protocol"], rows["metric"])) == [("ff", "meteor"), ("mcq", "accuracy")]
    v = verdicts(summary)[0]
    assert v.listens == "yes" and [r.metric for r in v.deciding] == ["meteor"]
    assert verdicts(summary, exclude=["m"]) == []  # e.g. a reference-rewrite system: no verdict


def test_free_form_marks_respect_the_minimum() -> None:
    from evalcore.reports.freeform import skyline_verdict, table2

    few = "ranks the skyline above (too few items for the CI: n=3 < 20)"
    assert skyline_verdict(0.2, 0.1, n=3, min_items=20) == few
    assert skyline_verdict(0.2, 0.1, n=30, min_items=20) == "ranks the skyline above (CI > 0)"
    diffs = pd.DataFrame([{"model": m, "condition": "correct-random", "kind": "paired_diff", "metric": "bleu",
                           "value": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": n} for m, n in (("a", 3), ("b", 30))])
    lines = table2(diffs, ["model", "condition"], ["bleu"], "paired_diff", mark_above_zero=True, min_items=20)
    assert lines[2].endswith("0.300] (n < 20) |") and lines[3].endswith("0.300] ↑ |")


def factual_summary(n_items: int = 12) -> pd.DataFrame:
    """A factual summary with the wide columns (``recall_micro_with_errors``, ``f1_micro_with_errors``, …): two
    models with long checkpoint names under five conditions, some judge errors."""
    from evalcore.scoring.requests import merge_chunks

    truth = [["piano", "violin"], ["cello"], ["flute", "oboe", "clarinet"], ["acoustic guitar"]]
    rows = []
    for model in ("qwen2-audio-7b-instruct-finetuned-step-120000", "musicflamingo-8b-chunked-60s-step-90000"):
        for cond in ("correct", "random", "silence", "noise", "text_only"):
            for i in range(n_items):
                labels = truth[i % len(truth)]
                heard = cond == "correct" and "qwen" in model
                error = "judge: timeout after 30 s" if i % 7 == 3 else None
                rows.append({"request_id": f"{model}-{cond}-{i}", "item_id": f"i{i}", "protocol": "factual",
                             "dataset": "musicnet", "task": "instrument", "model": model, "variant": "paper-default",
                             "condition": cond, "option_order": 0, "labels": labels, "error": error,
                             "extracted": None if error else (labels[:1] if heard else ["piano"]),
                             "error_stage": "judge" if error else None})
    merged = merge_chunks(rows)
    return markdown.with_kinds(summary_table(per_item_table(merged), resamples=200, confidence=0.95, seed=0,
                                             errors=[r for r in merged if r["error"]]).to_pandas())


@pytest.mark.e2e  # headless Chromium
def test_a_factual_report_fits_a_1280_px_window(tmp_path) -> None:
    """report.html of a factual summary, whose metric names and columns are the widest, has no horizontal
    scrolling in a 1280 px Chromium window (tables wrap; tests/chromium.py reads the layout widths), while the same
    page without its cells' break opportunities does."""
    import chromium

    summary = factual_summary()
    assert {"recall_micro_with_errors", "f1_micro_with_errors"} <= set(summary["metric"])
    page = report_html.render(markdown.render({"name": "factual-wide", "confidence": 0.95}, COUNTS, summary,
                                              pd.DataFrame()), summary)
    assert "recall_micro_with_errors</th>" in page.replace("<wbr>", "")  # the wide column is in a table
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    scroll, client = chromium.widths(path, tmp_path)
    assert client <= 1280 and scroll <= client, (scroll, client)
    unwrapped = tmp_path / "unwrapped.html"  # the control: without break opportunities and scroll boxes it overflows
    unwrapped.write_text(page.replace("<wbr>", "").replace('<div class="table-box">', "<div>"), encoding="utf-8")
    scroll, client = chromium.widths(unwrapped, tmp_path)
    assert scroll > client, (scroll, client)
