"""The report's lines on the two verdicts of a published rule: the figure the benchmark's released scorer gives
(``accuracy``, the default) and evalcore's strict reading of it (``accuracy_strict``), with how many items they
judge differently and how much of the published figure rests on the rule's quirks.

Read from the summary alone: the ``verdicts_differ`` rows (:data:`evalcore.core.schema.VERDICTS_DIFFER`, one per cell
of a protocol whose judge follows a published rule), whose definition names the rule's quirks
(:func:`evalcore.core.schema.quirks_of`), beside the two accuracies of the same cell. Each count links to exactly those
items in the item browser (:func:`evalcore.reports.browser_links.verdicts_href`).
"""

from __future__ import annotations

import math

import pandas as pd

from evalcore.reports.browser_links import verdicts_href
from evalcore.core.schema import VERDICTS_DIFFER, quirks_of, strict_name

__all__ = ["Pair", "pairs", "differ_cell", "line", "note", "section"]

METRIC = "accuracy"
CELL = ["protocol", "dataset", "model", "variant", "condition"]


class Pair:
    """One cell's two figures (group ``all``): the published ``value``, the ``strict`` one, the items that differ
    (``differ`` of ``n``) and the rule's quirks."""

    def __init__(self, key: tuple, value: float, strict: float, differ: int, n: int, quirks: str | None) -> None:
        self.protocol, self.dataset, self.model, self.variant, self.condition = key
        self.value, self.strict, self.differ, self.n, self.quirks = value, strict, differ, n, quirks

    @property
    def href(self) -> str:
        return verdicts_href(self.protocol, self.dataset, self.model, self.variant, self.condition)

    @property
    def rests(self) -> float:
        """Points of the published figure that rest on the quirks (published − strict; 0 when they agree)."""
        return self.value - self.strict


def pairs(summary: pd.DataFrame, group: str = "all") -> dict[tuple, Pair]:
    """Cell key (:data:`CELL`) → its :class:`Pair`, for every cell with a ``verdicts_differ`` row."""
    if summary.empty or "metric" not in summary.columns:
        return {}
    rows = summary[(summary["kind"] == "value") & (summary["group"] == group)]
    vals = {tuple(r[c] for c in CELL): r for r in rows[rows["metric"] == METRIC].to_dict("records")}
    twin = {tuple(r[c] for c in CELL): r for r in rows[rows["metric"] == strict_name(METRIC)].to_dict("records")}
    out = {}
    for r in rows[rows["metric"] == VERDICTS_DIFFER].to_dict("records"):
        key = tuple(r[c] for c in CELL)
        if key in vals and key in twin:
            out[key] = Pair(key, float(vals[key]["value"]), float(twin[key]["value"]), int(r["value"]), int(r["n"]),
                            quirks_of(r.get("definition")))
    return out


def differ_cell(p: Pair) -> str:
    """``17 of 136`` linked to those items in the browser (``0 of 136`` without a link)."""
    text = f"{p.differ} of {p.n}"
    return f"[{text}]({p.href})" if p.differ else text


def _pct(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def line(p: Pair) -> str:
    """The one line saying how much of the published figure rests on the quirks."""
    variant = "" if p.variant in (None, "", "default") else f" ({p.variant})"
    head = (f"**{p.protocol} · {p.dataset}**{variant}, {p.model}, {p.condition} audio: accuracy {_pct(p.value)} % by "
            f"the published rule, {_pct(p.strict)} % by evalcore's strict reading")
    if not p.differ:
        return head + f" — the two verdicts agree on all {p.n} items."
    quirks = p.quirks or "the rule's quirks"
    return (head + f" — {differ_cell(p)} items judged differently, credited by {quirks}: "
                   f"{100 * p.rests:+.1f} points of the published {_pct(p.value)} % rest on it.")


def section(summary: pd.DataFrame, condition: str = "correct") -> list[str]:
    """The report's section: one line per protocol instance, dataset, model and variant (``condition`` audio),
    then the other conditions' counts; nothing when no judge follows a published rule."""
    found = pairs(summary)
    if not found:
        return []
    out = ["", "## Published rule and strict reading", "",
           "Where a judge follows a benchmark's published scorer, `accuracy` is that scorer's verdict, its quirks "
           "included (the figure to compare with a paper), and `accuracy_strict` evalcore's strict reading of the "
           "same rule: the one option a response names, never guessed. The listening verdict reads the strict one. "
           "Each count opens exactly those items in the item browser.", ""]
    mine = sorted((k for k in found if k[4] == condition), key=lambda k: tuple(map(str, k)))
    for key in mine:
        out.append(f"* {line(found[key])}")
        others = [found[k] for k in sorted(found, key=lambda k: str(k[4]))
                  if k[:4] == key[:4] and k[4] != condition]
        if any(o.differ for o in others):
            out.append("  * under the controls: " + ", ".join(f"{o.condition} {differ_cell(o)}" for o in others))
    return out


def note(p: Pair | None) -> str:
    """A model-card cell's addition: `` · strict 0.515 · 17 differ`` (linked); empty without a strict figure."""
    if p is None:
        return ""
    differ = f"{p.differ} differ"
    return f" · strict {p.strict:.3f} · " + (f"[{differ}]({p.href})" if p.differ else differ)
