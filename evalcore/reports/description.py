"""Does listening beat a description? The ``caption`` condition's section of the report, read off the summary.

Per model and benchmark: the primary figure with the whole clip (``correct``), with a description of it in its
place (``caption``), and the paired difference correct − caption over the same items with its CI. A model that
reads no audio (a text LLM: the cascade baseline) has no audio to beat: its caption score is the cascade's, set
beside the audio models' in the same table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from evalcore.conditions.base import known
from evalcore.reports import md
from evalcore.reports.verdict import primary_of

__all__ = ["Difference", "differences", "section", "verdict"]


def _described(name: Any) -> bool:
    c = known(name)
    return c is not None and c.described


def verdict(diff: float, low: float, high: float) -> str:
    """What a paired difference correct − caption says, in words."""
    if math.isnan(diff):
        return "not measured"
    if low > 0:
        return "the whole clip beats the description"
    if high < 0:
        return "the description beats the whole clip"
    return "no difference shown (the CI reaches 0)"


@dataclass(frozen=True)
class Difference:
    """One model's paired difference correct − description on one benchmark, with its cells' values."""

    protocol: str
    dataset: str
    model: str
    variant: str
    metric: str
    condition: str  # the description condition's name
    value: float
    ci_low: float
    ci_high: float
    n: int
    whole: str  # the whole clip's value [CI], as shown
    described: str  # the description's value [CI], as shown


def differences(summary: pd.DataFrame) -> list[Difference]:
    """Every paired difference correct − a description condition of each benchmark's primary metric."""
    if summary.empty or "kind" not in summary.columns:
        return []
    rows = summary[summary["group"] == "all"]
    names = [c for c in dict.fromkeys(rows["condition"].astype(str)) if _described(c)]
    out = []
    for (proto, ds), g in rows.groupby(["protocol", "dataset"], sort=True):
        metric = primary_of(g)
        g = g[g["metric"] == metric]
        vals = g[g["kind"] == "value"].set_index(["model", "variant", "condition"])

        def cell(key: tuple) -> str:
            return "n/a" if key not in vals.index else md.ci(vals.loc[key].value, vals.loc[key].ci_low,
                                                           vals.loc[key].ci_high)

        for name in names:
            for d in g[(g["kind"] == "paired_diff") & (g["condition"] == f"correct-{name}")].itertuples():
                out.append(Difference(str(proto), str(ds), str(d.model), str(d.variant), str(metric), name,
                                      float(d.value), float(d.ci_low), float(d.ci_high), int(d.n),
                                      cell((d.model, d.variant, "correct")), cell((d.model, d.variant, name))))
    return out


def section(summary: pd.DataFrame, conf: int) -> list[str]:
    """The report's section (none without a description condition)."""
    found = differences(summary)
    if not found:
        return []
    lines, table = [], []
    for d in found:
        said = verdict(d.value, d.ci_low, d.ci_high)
        variant = "" if d.variant in ("", "default") else f" ({d.variant})"
        label = f"{d.model} · {d.protocol} · {d.dataset}{variant}"
        lines.append(f"* {label}: {said} ({d.metric} correct − {d.condition} "
                     f"{md.ci(d.value, d.ci_low, d.ci_high, True)}, n={d.n})")
        table.append([d.model, f"{d.protocol} · {d.dataset}", d.variant, d.metric, d.whole, d.described,
                      md.ci(d.value, d.ci_low, d.ci_high, True), said])
    intro = ("The same questions with a description of the clip in place of the audio (the items' captions, or an "
             "earlier run's answers to a describe prompt; docs/listening.md), and the paired difference correct − "
             f"description over the same items with its {conf} % CI. A model that reads no audio (a text LLM given "
             "the description: the cascade baseline) answers from the question alone under `correct`: its row says "
             "what the description adds to the question.")
    return (md.opening("Does listening beat a description?", intro) + lines + [""]
            + md.table(["model", "benchmark", "variant", "metric", "whole clip", "description",
                        "correct − description", "reading"], table))
