"""The nightly's figures: per series the trend of each headline metric over checkpoints with CI bands,
correct vs random / noise / silence (the listening gap over time), per-task MCQ accuracy, and the
leaderboard's bars. The page around them is :mod:`evalcore.reports.dashboard`.
"""

from __future__ import annotations

import html as htmlmod

import pandas as pd

from evalcore.kinds.base import kinds_where
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


#: font sizes (points) of the figures: at the page's 110 dpi, 10 pt is 15 px, as legible as the page's text
FONT = {"tick": 10, "label": 11, "title": 12, "legend": 11}
#: the widest figure (inches): at 110 dpi it fits the page's 72 rem column without being scaled down
MAX_WIDTH_IN = 10.0
#: markers and line styles that tell apart lines drawn on top of each other (e.g. three controls at 0)
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
STYLES = ("-", "--", ":", "-.")
#: lines whose values coincide are drawn this far apart on the x axis (a fraction of one checkpoint's step)
DODGE = 0.08


def _axes_grid(n: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    width = min(4.6 * cols, MAX_WIDTH_IN)
    fig, axes = plt.subplots(rows, cols, figsize=(width, 3.4 * rows + 0.6), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _band(ax, g: pd.DataFrame, labels: list[str], label: str, color: str | None, k: int, shift: float) -> None:
    """One line with its CI band: marker and line style ``k`` (distinct per line), moved ``shift`` along x."""
    g = g.sort_values("position")
    x = g["position"] + shift
    ax.plot(x, g["value"], marker=MARKERS[k % len(MARKERS)], ls=STYLES[k % len(STYLES)], lw=1.8, ms=7,
            mfc="white" if k % 2 else None, label=label, color=color)
    ax.fill_between(x, g["ci_low"], g["ci_high"], alpha=0.15, color=color)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=FONT["tick"])
    ax.tick_params(axis="y", labelsize=FONT["tick"])
    ax.set_ylim(-0.05, 1.05)
    ax.grid(axis="y", alpha=0.3)


def _shifts(g: pd.DataFrame, by: str) -> dict[str, float]:
    """An x offset per line of a panel: lines whose values coincide at some checkpoint (to 3 decimals) are spread
    around their checkpoints, each group of coinciding lines on its own, so every line stays visible; a line that
    meets no other stays on its checkpoints."""
    values = {str(v): dict(zip(gg["position"], gg["value"].round(3))) for v, gg in g.groupby(by, sort=True)}
    group = {n: n for n in values}  # union-find over "coincides somewhere with"

    def root(n: str) -> str:
        while group[n] != n:
            n = group[n]
        return n

    names = list(values)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if any(values[b].get(p) == v for p, v in values[a].items()):
                group[root(b)] = root(a)
    out = {}
    for n in names:
        members = [m for m in names if root(m) == root(n)]
        out[n] = DODGE * (members.index(n) - (len(members) - 1) / 2)
    return out


def trend_figure(hist: pd.DataFrame, labels: list[str], by: str, colors: dict[str, str] | None = None,
                 legend_title: str | None = None):
    """One panel per protocol × dataset (× metric); one line with its CI band per value of ``by``, each with its own
    marker and line style (lines that coincide are spread apart). One legend for the figure, under the panels,
    when there is more than one line (none for a lone ``default`` variant)."""
    panels = list(hist.groupby(["protocol", "dataset", "metric"], sort=True))
    fig, axes = _axes_grid(len(panels))
    order = sorted({str(v) for v in hist[by]})
    for ax, ((proto, ds, metric), g) in zip(axes, panels):
        shifts = _shifts(g, by)
        for value, gg in g.groupby(by, sort=True):
            k = order.index(str(value))
            _band(ax, gg, labels, str(value), (colors or {}).get(str(value)), k, shifts[str(value)])
        ax.set_title(f"{proto} · {ds} · {metric}", fontsize=FONT["title"])
    fig.tight_layout()
    if len(order) > 1:
        seen: dict = {}
        for ax in axes[:len(panels)]:
            for handle, name in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(name, handle)
        fig.legend([seen[n] for n in order if n in seen], [n for n in order if n in seen], loc="upper center",
                   bbox_to_anchor=(0.5, 0.0), ncol=min(len(order), 5), fontsize=FONT["legend"], frameon=False,
                   title=legend_title, title_fontsize=FONT["legend"])
    return fig


def series_section(name: str, hist: pd.DataFrame) -> tuple[str, str]:
    """(HTML, Markdown) of one series: headline trends, listening gap, per-task MCQ accuracy."""
    labels = list(hist.sort_values("position")["checkpoint"].drop_duplicates())
    head = _headline(hist)
    html_parts, md_parts = [f"<h2>Series {htmlmod.escape(name)}</h2>"], [f"## Series {name}"]
    correct = head[head["condition"] == "correct"]
    if len(correct):
        html_parts.append(figure_html(trend_figure(correct, labels, "variant", legend_title="prompt variant"),
                                      f"{name}: headline metrics over checkpoints (correct audio), 95% CI bands"))
        md_parts.append(md_table(correct.sort_values(["protocol", "position"]),
                                 ["protocol", "dataset", "variant", "metric", "checkpoint", "value", "ci_low",
                                  "ci_high"]))
    conds = head[head["condition"].isin(list(CONDITION_COLORS))]
    if conds["condition"].nunique() > 1:
        html_parts.append(figure_html(trend_figure(conds, labels, "condition", CONDITION_COLORS, "audio"),
                                      f"{name}: correct vs random / noise / silence / text-only audio — the "
                                      "listening gap over checkpoints"))
    gaps = hist[(hist["kind"] == "paired_diff") & (hist["group"] == "all")]
    gaps = gaps[gaps.set_index(["protocol_kind", "metric"]).index.isin(list(head.set_index(
        ["protocol_kind", "metric"]).index.unique()))]
    if len(gaps):
        md_parts.append("Listening gaps (correct − control):\n\n" + md_table(
            gaps.sort_values(["protocol", "condition", "position"]),
            ["protocol", "condition", "metric", "checkpoint", "value", "ci_low", "ci_high"]))
    cats = hist[hist["protocol_kind"].isin(kinds_where("options", "shuffled")) & (hist["metric"] == "accuracy") & (hist["kind"] == "value")
                & (hist["condition"] == "correct") & hist["group"].str.startswith("task=")]
    if len(cats):
        tasks = cats.assign(group=cats["group"].str.removeprefix("task="))
        html_parts.append(figure_html(trend_figure(tasks, labels, "group", legend_title="task"),
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
        ax.set_xticks(range(len(g)), [f"{s}\n{c}" for s, c in zip(g["series"], g["checkpoint"])],
                      fontsize=FONT["tick"])
        ax.tick_params(axis="y", labelsize=FONT["tick"])
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{proto} · {ds} · {metric}", fontsize=FONT["title"])
    fig.tight_layout()
    return fig
