"""Figures of a run's summary table, for the HTML report and the nightly dashboard.

Each function takes rows of the long-form summary (``tables/summary.parquet`` as a DataFrame, or rows of
several runs' summaries with the same columns) and returns a matplotlib :class:`~matplotlib.figure.Figure`
(drawn off-screen with the Agg renderer; no pyplot state), or ``None`` when the rows hold nothing to draw.
Embed with :func:`evalcore.reports.html.figure_html`.

* :func:`forest` — paired differences correct − control with their CIs, one line each (does it listen?), each
  naming its protocol instance, dataset and task;
* :func:`listening_map` — the same summarised per model and benchmark: one cell each, its listening mark and the
  deciding difference (the model card's rows);
* :func:`attention_bars` — multiple-choice accuracy per audio condition and model (the audio-attention test);
* :func:`breakdown_bars` — multiple-choice accuracy per category (or task, …) and model, correct audio;
* :func:`listening_curves` — the primary figure against the share of the clip heard (how much of it a model needs).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from evalcore.kinds.base import kinds_where
from evalcore.reports.verdict import MIN_ITEMS

__all__ = ["forest", "listening_map", "attention_bars", "breakdown_bars", "listening_curves"]

_CONDITIONS = ("correct", "noise", "silence", "random", "text_only")
#: font sizes (points): at the page's 110 dpi, 10 pt is 15 px (figures are at most 8 in wide: never scaled down)
FONT = {"tick": 10, "label": 11, "title": 12, "legend": 10}
#: the forest plot's width (inches, labels included: 1,100 px at 110 dpi, within the page's column), and the longest
#: one-line label (a longer one puts the model on a line of its own)
FOREST_WIDTH_IN = 10.0
LABEL_CHARS = 60


def _colors(names: list[str]) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def forest(diffs: pd.DataFrame, min_items: int = MIN_ITEMS, title: str = "Does it listen?",
           tasks: dict[tuple[str, str], str] | None = None) -> Figure | None:
    """A forest plot of paired differences (summary rows of kind ``paired_diff``): point and CI per row, a
    line at 0, one colour per model; rows over fewer than ``min_items`` items are drawn hollow and marked. Each
    label names the protocol instance and, where it is not the protocol's name, the dataset, and the task of
    ``tasks`` ((protocol, dataset) → task), so CMI-Bench's many ``cmi`` rows say which task each is."""
    d = diffs.dropna(subset=["value"]) if len(diffs) else diffs
    if d.empty:
        return None
    d = d.sort_values(["model", "protocol", "dataset", "metric", "condition"], kind="stable")
    colors = _colors(list(dict.fromkeys(d["model"])))
    fig = Figure(figsize=(FOREST_WIDTH_IN, 1.2 + 0.36 * len(d)))
    ax = fig.add_subplot()
    labels = []
    for y, r in enumerate(d.itertuples()):
        y = len(d) - 1 - y
        few = int(r.n or 0) < min_items
        c = colors[r.model]
        lo = r.value if r.ci_low is None or math.isnan(r.ci_low) else r.ci_low
        hi = r.value if r.ci_high is None or math.isnan(r.ci_high) else r.ci_high
        ax.plot([lo, hi], [y, y], color=c, lw=2, alpha=0.5 if few else 1.0)
        ax.plot([r.value], [y], "o", color=c, mfc="white" if few else c, ms=6)
        variant = "" if r.variant in (None, "", "default") else f" ({r.variant})"
        task = (tasks or {}).get((r.protocol, r.dataset))
        where = r.protocol + ("" if r.dataset == r.protocol else f" · {r.dataset}") + (f" · {task}" if task else "")
        what = f"{where} · {r.metric} {str(r.condition).replace('-', '−', 1)}" + (
            f"  [n={int(r.n or 0)} < {min_items}]" if few else f"  [n={int(r.n or 0)}]")
        who = f"{r.model}{variant}"
        labels.append((y, f"{who} · {what}" if len(who) + len(what) <= LABEL_CHARS else f"{who}\n{what}"))
    ax.axvline(0, color="#555", lw=1, ls="--")
    ax.set_yticks([y for y, _ in labels], [t for _, t in labels], fontsize=FONT["tick"])
    ax.tick_params(axis="x", labelsize=FONT["tick"])
    ax.set_ylim(-0.7, len(d) - 0.3)
    ax.set_xlabel("difference correct − control (CI)", fontsize=FONT["label"])
    ax.set_title(title, fontsize=FONT["title"])
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()  # the labels inside the figure's width: the plot narrows, the page never scales it down
    return fig


#: a listening mark's colour in :func:`listening_map` (✓ listens, ✗ no benefit at this n, ? too few items)
MARK_COLORS = {"✓": "#b7e1b0", "✗": "#f2b8b5", "?": "#e6e6e6", "": "#ffffff"}


def listening_map(labels: list[str], models: list[str], marks: list[list[str]], deciding: list[list[Any]],
                  title: str = "Does it listen? By model and benchmark") -> Figure | None:
    """The listening verdict summarised: one row per benchmark (``labels``), one column per model, each cell
    coloured by its mark (``marks[row][model]``: ✓ / ✗ / ?, "" none) and showing its deciding difference (a
    summary row, ``deciding[row][model]``, or None) with its n. ``None`` without rows."""
    if not labels or not models:
        return None
    from matplotlib.patches import Rectangle

    label_w = min(4.5, 0.075 * max(len(t) for t in labels) + 0.3)
    fig = Figure(figsize=(min(FOREST_WIDTH_IN, label_w + 1.5 * len(models)), 0.9 + 0.3 * len(labels)))
    ax = fig.add_subplot()
    for y, (row_marks, row_diffs) in enumerate(zip(marks, deciding)):
        for x, (mark, d) in enumerate(zip(row_marks, row_diffs)):
            ax.add_patch(Rectangle((x, y), 1, 1, facecolor=MARK_COLORS.get(mark, "#ffffff"), edgecolor="white", lw=2))
            if d is not None and mark:
                text = f"{mark} {d.value:+.2f}  n={int(d.n or 0)}"
            else:
                text = "—"
            ax.text(x + 0.5, y + 0.5, text, ha="center", va="center", fontsize=FONT["tick"])
    ax.set_xlim(0, len(models))
    ax.set_ylim(len(labels), 0)
    ax.set_xticks([x + 0.5 for x in range(len(models))], models, fontsize=FONT["tick"])
    ax.xaxis.tick_top()
    ax.set_yticks([y + 0.5 for y in range(len(labels))], labels, fontsize=FONT["tick"])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(title, fontsize=FONT["title"], pad=24)
    fig.tight_layout()
    return fig


def _mcq(summary: pd.DataFrame) -> pd.DataFrame:
    if summary.empty:
        return summary
    kinds = summary["protocol_kind"] if "protocol_kind" in summary.columns else summary["protocol"]
    shuffled = kinds.fillna(summary["protocol"]).isin(kinds_where("options", "shuffled"))
    return summary[shuffled & (summary["kind"] == "value")]


def _bars(ax: Any, table: pd.DataFrame, err: pd.DataFrame | None, colors: dict[str, Any]) -> None:
    """Grouped bars: x = the table's index, one bar per column (model), values in %."""
    width = 0.8 / max(1, len(table.columns))
    for i, model in enumerate(table.columns):
        xs = [x + (i - (len(table.columns) - 1) / 2) * width for x in range(len(table.index))]
        yerr = None if err is None or model not in err.columns else 100 * err[model].reindex(table.index).fillna(0)
        ax.bar(xs, 100 * table[model].fillna(0), width, yerr=yerr, capsize=2, label=model, color=colors[model])
    ax.set_xticks(range(len(table.index)), list(table.index), rotation=20 if len(table.index) > 5 else 0,
                  ha="right" if len(table.index) > 5 else "center", fontsize=FONT["tick"])
    ax.tick_params(axis="y", labelsize=FONT["tick"])
    ax.set_ylim(0, 105)
    ax.set_ylabel("accuracy (%)", fontsize=FONT["label"])
    ax.grid(axis="y", alpha=0.3)
    if len(table.columns):  # beside the axes, never over a bar (a legend of nothing warns and says nothing)
        ax.legend(fontsize=FONT["legend"], loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  title="model", title_fontsize=FONT["legend"])
    else:
        ax.text(0.5, 0.5, "no scored answers", transform=ax.transAxes, ha="center", fontsize=FONT["label"])


def _panels(cells: list[tuple[str, pd.DataFrame]], draw: Any) -> Figure | None:
    if not cells:
        return None
    fig = Figure(figsize=(8.0, 3.4 * len(cells)))
    for i, (title, df) in enumerate(cells):
        ax = fig.add_subplot(len(cells), 1, i + 1)
        draw(ax, df)
        ax.set_title(title, fontsize=FONT["title"])
    fig.tight_layout()
    return fig


def attention_bars(summary: pd.DataFrame) -> Figure | None:
    """Multiple-choice accuracy (%) per audio condition, one bar per model (± SD over option orders), one panel
    per protocol instance and dataset; ``None`` without multiple-choice rows in two conditions or more."""
    df = _mcq(summary)
    if df.empty:
        return None
    df = df[df["group"] == "all"]
    cells = []
    for (proto, ds), g in df.groupby(["protocol", "dataset"], sort=True):
        if g["condition"].nunique() < 2:
            continue
        cells.append((f"Audio-attention test · {proto} · {ds}", g))
    models = list(dict.fromkeys(df["model"]))
    colors = _colors(models)

    def draw(ax: Any, g: pd.DataFrame) -> None:
        present = list(dict.fromkeys(g["condition"]))
        order = [c for c in _CONDITIONS if c in present] + sorted(set(present) - set(_CONDITIONS))
        acc = g[g["metric"] == "accuracy"].pivot_table(index="condition", columns="model", values="value")
        sd = g[g["metric"] == "accuracy_sd"].pivot_table(index="condition", columns="model", values="value")
        _bars(ax, acc.reindex(order), sd.reindex(order) if len(sd) else None, colors)

    return _panels(cells, draw)


def breakdown_bars(summary: pd.DataFrame, name: str = "category", condition: str = "correct") -> Figure | None:
    """Multiple-choice accuracy (%) per value of breakdown ``name`` (category, task, difficulty, genre, …) with
    the ``condition`` audio, one bar per model, one panel per protocol instance and dataset; ``None`` when the
    summary has no such breakdown."""
    df = _mcq(summary)
    if df.empty:
        return None
    df = df[(df["condition"] == condition) & (df["metric"] == "accuracy")
            & df["group"].astype(str).str.startswith(f"{name}=")]
    cells = [(f"Accuracy by {name} · {proto} · {ds} ({condition} audio)", g)
             for (proto, ds), g in df.groupby(["protocol", "dataset"], sort=True)]
    colors = _colors(list(dict.fromkeys(df["model"])))

    def draw(ax: Any, g: pd.DataFrame) -> None:
        g = g.assign(value_of=g["group"].str.split("=", n=1).str[1])
        _bars(ax, g.pivot_table(index="value_of", columns="model", values="value"), None, colors)

    return _panels(cells, draw)


#: a segment position's line style on the listening curve (one colour per model)
_POSITION_STYLES = {"first": "-", "middle": "--", "last": ":"}


def listening_curves(curves: list[Any]) -> Figure | None:
    """The listening curves (:class:`evalcore.reports.listening_curve.Curve`): the primary figure against the share
    of the clip heard, one panel per benchmark and variant, one colour per model and one line style per segment
    position, each point with its CI; ``None`` without a curve."""
    if not curves:
        return None
    panels: dict[tuple, list[Any]] = {}
    for c in curves:
        panels.setdefault((c.protocol, c.dataset, c.variant, c.metric), []).append(c)
    colors = _colors(list(dict.fromkeys(c.model for c in curves)))
    cells = [(f"Listening curve · {p} · {d}" + ("" if v in ("", "default") else f" ({v})"), (m, cs))
             for (p, d, v, m), cs in panels.items()]

    def draw(ax: Any, cell: tuple[str, list[Any]]) -> None:
        metric, cs = cell
        for c in cs:
            xs = [100 * p.kept for p in c.points]
            ys = [p.value for p in c.points]
            low = [max(0.0, p.value - p.ci_low) if not math.isnan(p.ci_low) else 0.0 for p in c.points]
            high = [max(0.0, p.ci_high - p.value) if not math.isnan(p.ci_high) else 0.0 for p in c.points]
            ax.errorbar(xs, ys, yerr=[low, high], capsize=3, marker="o", color=colors[c.model],
                        linestyle=_POSITION_STYLES.get(c.position, "-."), label=f"{c.model} ({c.position})")
        ax.set_xlim(-3, 103)
        ax.set_xlabel("share of the clip heard (%): 0 = no audio, 100 = the whole clip", fontsize=FONT["label"])
        ax.set_ylabel(metric, fontsize=FONT["label"])
        ax.tick_params(labelsize=FONT["tick"])
        ax.grid(alpha=0.3)
        ax.legend(fontsize=FONT["legend"], loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)

    return _panels(cells, draw)
