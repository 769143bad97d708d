"""``report.html``: the Markdown report as one self-contained page, with the plots of
:mod:`evalcore.reports.plots` embedded after the sections they illustrate (the forest plot after
"Does it listen?", the attention bars after the audio-attention tables, accuracy per category — else per
task — after the multiple-choice breakdowns).

A run with a model card (``model_card:``) has it right after the verdict, within the page's first screens: the
forest plot, one line per paired difference (a hundred and more for the music card), would push it thousands of
pixels down. There the listening verdict is drawn summarised per model and benchmark after the card
(:func:`evalcore.reports.plots.listening_map`, the card's rows), and the forest plot, every difference, follows behind
a toggle (``<details>``), its rows naming their task."""

from __future__ import annotations

from typing import Any, Callable, Iterable

import pandas as pd

from evalcore.reports import listening_curve, model_card, plots
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


def _html(fig: Any, caption: str) -> str:
    """A figure as the page embeds it; "" for none."""
    return "" if fig is None else figure_html(fig, caption)


def _forest(summary: pd.DataFrame, min_items: int, exclude: Iterable[str], tasks: dict) -> tuple[Any, str]:
    return (plots.forest(listening_rows(summary, exclude), min_items, tasks=tasks),
            "Paired differences correct − control of each protocol's primary metric, with CIs; hollow points: fewer "
            f"than {min_items} items (decide nothing).")


def _card_figures(summary: pd.DataFrame, min_items: int, exclude: Iterable[str], card: dict[str, Any],
                  benchmarks: list[dict[str, Any]], tasks: dict) -> str:
    """After the model card: the verdict per model and benchmark, then every difference behind a toggle."""
    c = model_card.build(summary, card, min_items, exclude, benchmarks)
    labels = [f"{r.benchmark} · {r.task}" if r.task else r.benchmark for r in c.rows]
    out = [_html(plots.listening_map(labels, c.models, [r.marks for r in c.rows], [r.deciding for r in c.rows]),
                 "The listening verdict by model and benchmark: each cell the model's mark on that row of the card (✓ "
                 f"a control's paired difference has its CI above 0, ✗ none has, ? fewer than {min_items} items) and "
                 "the difference with the highest lower bound, with its n.")]
    forest = _html(*_forest(summary, min_items, exclude, tasks))
    if forest:
        n = len(listening_rows(summary, exclude))
        out.append(f"<details><summary>Every paired difference ({n}), as a forest plot</summary>\n{forest}\n</details>")
    return "\n".join(x for x in out if x)


def render(markdown: str, summary: pd.DataFrame, min_items: int = MIN_ITEMS, exclude: Iterable[str] = (),
           card: dict[str, Any] | None = None, benchmarks: Iterable[dict[str, Any]] = ()) -> str:
    """The page: ``markdown`` (the run's report.md) with the run's figures (from ``summary``) inserted; ``card``
    and ``benchmarks``: run.json's ``model_card`` and ``benchmarks`` (module docstring)."""
    benchmarks = list(benchmarks)
    tasks = {(b["protocol"], b["dataset"]): ", ".join(b.get("tasks") or [])[:40] for b in benchmarks
             if b.get("tasks") and b["dataset"] != ", ".join(b.get("tasks") or [])}
    has_card = card is not None and "\n## Model card" in markdown
    figures: dict[str, Callable[[], str]] = {  # each section's figures as HTML ("" for none)
        "## Does it listen?": lambda: "" if has_card else _html(*_forest(summary, min_items, exclude, tasks)),
        "## Model card": lambda: _card_figures(summary, min_items, exclude, card or {}, benchmarks, tasks),
        "## Audio-attention test": lambda: _html(plots.attention_bars(summary),
                                                 "Multiple-choice accuracy (%) per audio condition, ± SD over option "
                                                 "orders."),
        "## Multiple-choice breakdowns": lambda: _html(*_breakdown(summary)),
        "## How much of the clip does it need?": lambda: _html(
            plots.listening_curves(listening_curve.curves(summary)),
            "Each model's primary figure (with its CI) against the share of the clip it heard: no audio, the "
            "segments of each position (line style), the whole clip."),
    }
    parts = sections(markdown)
    last = {prefix: max((i for i, s in enumerate(parts) if s.startswith(prefix)), default=None) for prefix in figures}
    body = []
    for i, part in enumerate(parts):
        body.append(markdown_html(part))
        for prefix, make in figures.items():
            if last[prefix] == i and (made := make()):
                body.append(made)
    title = parts[0].splitlines()[0].lstrip("# ").strip() if parts[0] else "evalcore report"
    return page(title or "evalcore report", _coloured("\n".join(body)))


def _coloured(body: str) -> str:
    """The verdicts in the page's verdict colours (``listens: <strong>yes</strong>`` → class ``verdict-yes``)."""
    for word in ("yes", "no", "unclear"):
        body = body.replace(f"listens: <strong>{word}</strong>",
                            f'listens: <strong class="verdict-{word}">{word}</strong>')
    return body
