"""The nightly's figures: per series the trend of each headline metric over checkpoints with CI bands,
correct vs random / noise / silence (the listening gap over time), per-task MCQ accuracy, and the
leaderboard's bars. The page around them is :mod:`evalcore.reports.dashboard`.
"""

from __future__ import annotations

import html as htmlmod

import pandas as pd

from evalcore.reports.html import figure_html
from evalcore.reports.tables_html import num

#: the headline metric of each protocol kind (first one present)
HEADLINE = {"factual": ("f1_micro", "f1_macro"), "mcq": ("accuracy",), "freeform": ("meteor", "rouge", "bleu")}
CONDITION_COLORS = {"correct": "#1f77b4", "random": "#d62728", "noise": "#7f7f7f", "silence": "#2ca02c",
                    "text_only": "#9467bd"}


def md_table(df: pd.DataFrame, columns: list[str]) -> str:
    """A GitHub-style Markdown table of ``columns`` of ``df``."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(num(v).replace("|", "\\|") for v in row) + " |"
              for row in df[columns].itertuples(index=False)]
    return "\n".join(lines)


def _headline(hist: pd.DataFrame) -> pd.DataFrame:
    """Value rows (group all) of each protocol's headline metric."""
    rows = hist[(hist["kind"] == "value") & (hist["group"] == "all")]
    keep = []
    for proto, g in rows.groupby("protocol_kind"):
        metric = next((m for m in HEADLINE.get(proto, ()) if m in set(g["metric"])), None)
        if metric is not None:
            keep.append(g[g["metric"] == metric])
    return pd.concat(keep) if keep else rows.iloc[0:0]


def _axes_grid(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _band(ax, g: pd.DataFrame, labels: list[str], label: str, color: str | None = None) -> None:
    g = g.sort_values("position")
    ax.plot(g["position"], g["value"], marker="o", label=label, color=color)
    ax.fill_between(g["position"], g["ci_low"], g["ci_high"], alpha=0.2, color=color)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylim(-0.05, 1.05)


def trend_figure(hist: pd.DataFrame, labels: list[str], by: str, colors: dict[str, str] | None = None):
    """One panel per protocol × dataset (× metric); one line with its CI band per value of ``by``."""
    panels = list(hist.groupby(["protocol", "dataset", "metric"], sort=True))
    fig, axes = _axes_grid(len(panels))
    for ax, ((proto, ds, metric), g) in zip(axes, panels):
        for value, gg in g.groupby(by, sort=True):
            _band(ax, gg, labels, str(value), (colors or {}).get(str(value)))
        ax.set_title(f"{proto} · {ds} · {metric}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def series_section(name: str, hist: pd.DataFrame) -> tuple[str, str]:
    """(HTML, Markdown) of one series: headline trends, listening gap, per-task MCQ accuracy."""
    labels = list(hist.sort_values("position")["checkpoint"].drop_duplicates())
    head = _headline(hist)
    html_parts, md_parts = [f"<h2>Series {htmlmod.escape(name)}</h2>"], [f"## Series {name}"]
    correct = head[head["condition"] == "correct"]
    if len(correct):
        html_parts.append(figure_html(trend_figure(correct, labels, "variant"),
                                      f"{name}: headline metrics over checkpoints (correct audio), 95% CI bands"))
        md_parts.append(md_table(correct.sort_values(["protocol", "position"]),
                                 ["protocol", "dataset", "variant", "metric", "checkpoint", "value", "ci_low",
                                  "ci_high"]))
    conds = head[head["condition"].isin(list(CONDITION_COLORS))]
    if conds["condition"].nunique() > 1:
        html_parts.append(figure_html(trend_figure(conds, labels, "condition", CONDITION_COLORS),
                                      f"{name}: correct vs random / noise / silence / text-only audio — the "
                                      "listening gap over checkpoints"))
    gaps = hist[(hist["kind"] == "paired_diff") & (hist["group"] == "all")]
    gaps = gaps[gaps.set_index(["protocol_kind", "metric"]).index.isin(list(head.set_index(
        ["protocol_kind", "metric"]).index.unique()))]
    if len(gaps):
        md_parts.append("Listening gaps (correct − control):\n\n" + md_table(
            gaps.sort_values(["protocol", "condition", "position"]),
            ["protocol", "condition", "metric", "checkpoint", "value", "ci_low", "ci_high"]))
    cats = hist[(hist["protocol_kind"] == "mcq") & (hist["metric"] == "accuracy") & (hist["kind"] == "value")
                & (hist["condition"] == "correct") & hist["group"].str.startswith("task=")]
    if len(cats):
        html_parts.append(figure_html(trend_figure(cats, labels, "group"),
                                      f"{name}: MCQ accuracy per task over checkpoints (correct audio)"))
        md_parts.append("MCQ accuracy per task:\n\n" + md_table(cats.sort_values(["group", "position"]),
                                                                ["group", "checkpoint", "value", "ci_low", "ci_high"]))
    return "\n".join(html_parts), "\n\n".join(md_parts)


def leaderboard_figure(board: pd.DataFrame):
    """One panel per protocol × dataset × metric: each series' latest value, the leader's bar darker."""
    panels = list(board.groupby(["protocol", "dataset", "metric"], sort=True))
    fig, axes = _axes_grid(len(panels))
    for ax, ((proto, ds, metric), g) in zip(axes, panels):
        g = g.drop_duplicates("series").sort_values("value", ascending=False)
        colors = ["#1f4e79" if s == lead else "#8fb3d9" for s, lead in zip(g["series"], g["leader"])]
        ax.bar(range(len(g)), g["value"], color=colors)
        ax.set_xticks(range(len(g)), [f"{s}\n{c}" for s, c in zip(g["series"], g["checkpoint"])], fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{proto} · {ds} · {metric}", fontsize=9)
    fig.tight_layout()
    return fig
