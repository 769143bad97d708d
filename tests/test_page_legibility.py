"""Pages that read at a glance in a 1280 px window: report.html and the nightly's dashboard.html.

* figures: no text under 10 pt (15 px at the pages' 110 dpi), shown at (nearly) their own size, legends beside or
  under the axes, never over them; lines drawn on top of each other (three controls at 0) told apart by marker,
  line style and position; no legend for a lone ``default`` variant;
* tables: a header breaks only between words (at a space or before the underscore joining two: ``recall`` /
  ``_micro``), a confidence interval never breaks — read off Chromium's layout (tests/chromium.py), with control
  pages laid out the old way that fail both checks;
* the dashboard's Tonight block says why a checkpoint regressed, its drops counted once, against what;
* the report's Errors table marks a cut reason.
"""

from __future__ import annotations

import os
import shutil
import warnings

import matplotlib
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

import chromium
from test_dashboard_render import _board, _history, _regressions, _tonight
from test_report_verdict import COUNTS, factual_summary, summary_of
from evalcore.reports import dashboard, markdown, plots, report_html, trends
from evalcore.reports.verdict import listening_rows

matplotlib.use("Agg")
SMALLEST_PT = 10


def small_texts(fig) -> list[str]:
    """The visible texts of ``fig`` under :data:`SMALLEST_PT`."""
    return [f"{t.get_text()!r} {t.get_fontsize()}" for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and t.get_fontsize() < SMALLEST_PT]


def legends_over_axes(fig) -> list[str]:
    """Legends (of an axes or of the figure) whose drawn box overlaps the plotting area of a visible axes."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    out = []
    for lg in legends:
        box = lg.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible() and box.overlaps(ax.get_window_extent(renderer)):
                out.append(f"{[t.get_text() for t in lg.get_texts()]} over {ax.get_title()!r}")
    return out


def test_the_report_figures_are_legible() -> None:
    summary = summary_of(30)
    figs = {"forest": plots.forest(listening_rows(summary)), "attention": plots.attention_bars(summary),
            "category": plots.breakdown_bars(summary, "category")}
    for name, fig in figs.items():
        assert fig is not None and small_texts(fig) == [], name
        assert legends_over_axes(fig) == [], name
    assert [t.get_text() for t in figs["attention"].axes[0].get_legend().get_texts()] == ["deaf", "listener"]
    # a panel with nothing scored says so, and draws no empty legend (matplotlib warned, through --quiet)
    empty = summary.assign(value=summary["value"].where(summary["metric"] != "accuracy"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plots.attention_bars(empty)
    assert "no scored answers" in [t.get_text() for t in fig.findobj(Text)]


def test_the_trend_figures_are_legible_and_tell_overlapping_lines_apart() -> None:
    hist = _history()
    labels = ["step-1000", "step-2000", "step-3000"]
    head = trends._headline(hist)
    conds = head[head["condition"].isin(list(trends.CONDITION_COLORS))]
    fig = trends.trend_figure(conds, labels, "condition", trends.CONDITION_COLORS, "audio")
    assert small_texts(fig) == [] and legends_over_axes(fig) == []
    assert all(ax.get_legend() is None for ax in fig.axes)  # one legend for the figure, under the panels
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["correct", "noise", "random", "silence"]
    panel = next(ax for ax in fig.axes if ax.get_title() == "mcq · synth · accuracy")
    lines = {ln.get_label(): ln for ln in panel.get_lines()}
    noise, silence = lines["noise"], lines["silence"]
    assert list(noise.get_ydata()) == list(silence.get_ydata()) == [0.0, 0.0, 0.0]  # drawn on the same spot …
    assert (noise.get_marker(), noise.get_linestyle()) != (silence.get_marker(), silence.get_linestyle())
    assert min(abs(a - b) for a, b in zip(noise.get_xdata(), silence.get_xdata())) >= trends.DODGE  # … side by side
    assert list(lines["correct"].get_xdata()) != [0, 1, 2]  # correct meets random at step-3000: moved apart too
    # a lone default variant: no legend at all; the figure is never wider than the page's column
    single = trends.trend_figure(head[head["condition"] == "correct"], labels, "variant", legend_title="variant")
    assert single.legends == [] and all(ax.get_legend() is None for ax in single.axes)
    assert single.get_figwidth() <= trends.MAX_WIDTH_IN and small_texts(single) == []


def _check_layout(page, tmp_path, controls: bool = True) -> dict:
    """Chromium's layout of ``page`` at 1280 px, checked: headers break only between words, CIs stay whole, images
    shown at 90 % of their size or more; with ``controls``, the same page laid out the old way fails the first two."""
    chromium.require()
    lay = chromium.layout(page, tmp_path)
    assert chromium.mid_word_breaks(lay["headers"]) == []
    assert lay["cis"] and [c for c in lay["cis"] if len(c) > 1] == []
    assert lay["images"] and all(shown >= 0.9 * natural for natural, shown in lay["images"]), lay["images"]
    if not controls:
        return lay
    assert any(len(h) > 1 for h in lay["headers"]), "no header had to break: the check says nothing"
    old = tmp_path / f"old-{page.name}"  # breaks after underscores, CIs free to wrap
    old.write_text(page.read_text().replace("<wbr>_", "_<wbr>").replace('class="ci"', 'class="ci-off"'))
    was = chromium.layout(old, tmp_path)
    assert chromium.mid_word_breaks(was["headers"]) and [c for c in was["cis"] if len(c) > 1]
    return lay


def _keep(*paths) -> None:
    if os.environ.get("EVALCORE_KEEP_SHOTS"):  # for a person to look at
        for p in paths:
            shutil.copy(p, os.environ["EVALCORE_KEEP_SHOTS"])


def test_the_report_page_at_1280_px(tmp_path) -> None:
    summary = factual_summary()
    text = markdown.render({"name": "factual-wide", "confidence": 0.95}, COUNTS, summary, pd.DataFrame())
    page = tmp_path / "report.html"
    page.write_text(report_html.render(text, summary), encoding="utf-8")
    _check_layout(page, tmp_path)
    _keep(chromium.screenshot(page, tmp_path / "report-1280.png", tmp_path, 1280, 1600), page)


def test_the_dashboard_at_1280_px_says_why_and_counts_drops_once(tmp_path) -> None:
    tonight = _tonight()
    html, md = dashboard.render(tonight, _regressions(), _history(), [], [], _board())
    page = tmp_path / "dashboard.html"
    page.write_text(html, encoding="utf-8")
    lay = _check_layout(page, tmp_path, controls=False)  # the report page above shows the checks can fail
    assert len(lay["images"]) == 4
    row = next(ln for ln in md.splitlines() if ln.startswith("| **listener/step-3000**"))
    cells = [c.strip(" *") for c in row.strip("|").split("|")]
    flagged_rows = _regressions().query("checkpoint == 'step-3000' and flagged")
    assert len(flagged_rows) == 24 and cells[3] == "12"  # 12 drops, each flagged against two references
    assert cells[4].startswith("12 drop(s) flagged (12 vs the previous checkpoint step-2000, 12 vs the baseline "
                               "step-1000); largest: mcq · synth accuracy correct -0.512 [-0.612, -0.462]")
    _keep(chromium.screenshot(page, tmp_path / "dashboard-1280.png", tmp_path, 1280, 2400), page)


def test_the_errors_table_marks_a_cut_reason() -> None:
    long = "judge: the extractor answered " + "x" * 300
    errors = pd.DataFrame([{"table": "judgments", "error_stage": "judge", "error_class": "judge", "error": long},
                           {"table": "responses", "error_stage": "model", "error_class": "model", "error": "short"}])
    report = markdown.render({"name": "t", "confidence": 0.95}, COUNTS, pd.DataFrame(), errors)
    table = report.split("## Errors", 1)[1]
    (cut,) = [ln for ln in table.splitlines() if "the extractor answered" in ln]
    shown = cut.split("|")[4].strip()
    assert shown.endswith(" …") and len(shown) == markdown.REASON_SHOWN + 1 and long.startswith(shown[:-2])
    assert "| short |" in table and "`tables/errors.parquet` holds every error row with its whole reason" in table
    fits = markdown.render({"name": "t", "confidence": 0.95}, COUNTS, pd.DataFrame(), errors.iloc[1:])
    assert "…" not in fits.split("## Errors", 1)[1]  # nothing cut, no mark and no note


def test_the_rule_is_a_short_list() -> None:
    report = markdown.render({"name": "t", "confidence": 0.95, "min_items": 20}, COUNTS, summary_of(30),
                             pd.DataFrame())
    top = report.split("## Counts", 1)[0]
    rule = top.split("How the verdict is decided", 1)[1].split("**n** counts items", 1)[0]
    items = [ln for ln in rule.splitlines() if ln.startswith("* ")]
    assert [i.split(":")[0] for i in items[:3]] == ["* **yes**", "* **no**", "* **unclear**"] and len(items) == 4
    assert all(len(i) < 260 for i in items)  # short items, not one paragraph
