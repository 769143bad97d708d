"""``report.html``: the Markdown report as one self-contained page, with the plots of
:mod:`evalcore.reports.plots` embedded after the sections they illustrate (the forest plot after
"Does it listen?", the attention bars after the audio-attention tables, accuracy per category — else per
task — after the multiple-choice breakdowns)."""

from __future__ import annotations

from typing import Any, Callable, Iterable

import pandas as pd

from evalcore.reports import plots
from evalcore.reports.html import figure_html, markdown_html, page
from evalcore.reports.verdict import MIN_ITEMS, listening_rows

__all__ = ["render", "sections"]


def sections(markdown: str) -> list[str]:
    """The report split before each ``## `` heading (the first part holds the title)."""
    out: list[list[str]] = [[]]
    for line in markdown.splitlines():
        if line.startswith("## "):
            out.append([])
        out[-1].append(line)
    return ["\n".join(s) for s in out]


def _breakdown(summary: pd.DataFrame) -> Any:
    groups = summary["group"].astype(str) if "group" in summary.columns else pd.Series(dtype=str)
    name = "category" if groups.str.startswith("category=").any() else "task"
    return plots.breakdown_bars(summary, name), f"Accuracy by {name}, correct audio (%)"


def render(markdown: str, summary: pd.DataFrame, min_items: int = MIN_ITEMS, exclude: Iterable[str] = ()) -> str:
    """The page: ``markdown`` (the run's report.md) with the run's figures (from ``summary``) inserted."""
    figures: dict[str, Callable[[], tuple[Any, str]]] = {
        "## Does it listen?": lambda: (plots.forest(listening_rows(summary, exclude), min_items),
                                       "Paired differences correct − control of each protocol's primary metric, "
                                       f"with CIs; hollow points: fewer than {min_items} items (decide nothing)."),
        "## Audio-attention test": lambda: (plots.attention_bars(summary),
                                            "Multiple-choice accuracy (%) per audio condition, ± SD over option "
                                            "orders."),
        "## Multiple-choice breakdowns": lambda: _breakdown(summary),
    }
    parts = sections(markdown)
    last = {prefix: max((i for i, s in enumerate(parts) if s.startswith(prefix)), default=None) for prefix in figures}
    body = []
    for i, part in enumerate(parts):
        body.append(markdown_html(part))
        for prefix, make in figures.items():
            if last[prefix] == i:
                fig, caption = make()
                if fig is not None:
                    body.append(figure_html(fig, caption))
    title = parts[0].splitlines()[0].lstrip("# ").strip() if parts[0] else "evalcore report"
    return page(title or "evalcore report", _coloured("\n".join(body)))


def _coloured(body: str) -> str:
    """The verdicts in the page's verdict colours (``listens: <strong>yes</strong>`` → class ``verdict-yes``)."""
    for word in ("yes", "no", "unclear"):
        body = body.replace(f"listens: <strong>{word}</strong>",
                            f'listens: <strong class="verdict-{word}">{word}</strong>')
    return body
