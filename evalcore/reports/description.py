"""Does listening beat a description? The ``caption`` condition's section of the report, read off the summary.

Per model and benchmark: the primary figure with the whole clip (``correct``), with a description of it in its
place (``caption``), and the paired difference correct − caption over the same items with its CI. A model that
reads no audio (a text LLM: the cascade baseline) has no audio to beat: its caption score is the cascade's, set
beside the audio models' in the same table.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from evalcore.conditions.base import condition
from evalcore.reports.verdict import primary_of

__all__ = ["section"]


def _described(name: Any) -> bool:
    try:
        return condition(str(name)).described
    except ValueError:
        return False


def _ci(v: Any, lo: Any, hi: Any, signed: bool = False) -> str:
    if v is None or pd.isna(v):
        return "n/a"
    f = "{:+.3f}" if signed else "{:.3f}"
    return f.format(v) if lo is None or pd.isna(lo) else f"{f.format(v)} [{f.format(lo)}, {f.format(hi)}]"


def verdict(diff: float, low: float, high: float) -> str:
    """What a paired difference correct − caption says, in words."""
    if math.isnan(diff):
        return "not measured"
    if low > 0:
        return "the whole clip beats the description"
    if high < 0:
        return "the description beats the whole clip"
    return "no difference shown (the CI reaches 0)"


def section(summary: pd.DataFrame, conf: int) -> list[str]:
    """The report's section (none without a description condition)."""
    if summary.empty or "kind" not in summary.columns:
        return []
    rows = summary[summary["group"] == "all"]
    names = [c for c in dict.fromkeys(rows["condition"].astype(str)) if _described(c)]
    if not names:
        return []
    lines, table = [], []
    for (proto, ds), g in rows.groupby(["protocol", "dataset"], sort=True):
        metric = primary_of(g)
        g = g[g["metric"] == metric]
        vals = g[g["kind"] == "value"].set_index(["model", "variant", "condition"])
        for name in names:
            for d in g[(g["kind"] == "paired_diff") & (g["condition"] == f"correct-{name}")].itertuples():
                said = verdict(float(d.value), float(d.ci_low), float(d.ci_high))
                label = f"{d.model} · {proto} · {ds}" + ("" if d.variant in ("", "default") else f" ({d.variant})")
                lines.append(f"* {label}: {said} ({metric} correct − {name} "
                             f"{_ci(d.value, d.ci_low, d.ci_high, True)}, n={int(d.n)})")
                whole = vals.loc[(d.model, d.variant, "correct")] if (d.model, d.variant, "correct") in vals.index \
                    else None
                desc = vals.loc[(d.model, d.variant, name)] if (d.model, d.variant, name) in vals.index else None
                table.append([d.model, f"{proto} · {ds}", d.variant, metric,
                              "n/a" if whole is None else _ci(whole.value, whole.ci_low, whole.ci_high),
                              "n/a" if desc is None else _ci(desc.value, desc.ci_low, desc.ci_high),
                              _ci(d.value, d.ci_low, d.ci_high, True), said])
    if not lines:
        return []
    header = ["model", "benchmark", "variant", "metric", "whole clip", "description", "correct − description",
              "reading"]
    return ["", "## Does listening beat a description?", "",
            "The same questions with a description of the clip in place of the audio (the items' captions, or an "
            "earlier run's answers to a describe prompt; docs/listening.md), and the paired difference correct − "
            f"description over the same items with its {conf} % CI. A model that reads no audio (a text LLM given the "
            "description: the cascade baseline) answers from the question alone under `correct`: its row says what the "
            "description adds to the question.", "",
            *lines, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(x) for x in r) + " |" for r in table)]
