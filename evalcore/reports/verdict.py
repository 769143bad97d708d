"""Does the model listen? One verdict per model from the paired differences correct − control.

The summary's ``paired_diff`` rows hold, per model, protocol instance, dataset and control condition
(``random``, ``silence``, ``noise``, ``text_only``), the difference of the protocol's metric between the
correct audio and the control over the same items, with its bootstrap CI and ``n`` (items scored in both).
Every metric considered is higher-is-better, so listening shows as a difference above 0.

Each difference is first labelled (:func:`interval_label`):

* ``too few items (n=2 < 20)`` — fewer than ``min_items`` paired items: it decides nothing;
* ``degenerate […]`` — a zero-width interval at 0 (every resample gave the same difference, no difference on
  any item, e.g. identical scores): flagged, never called "CI includes 0"; with enough items it counts by its
  bounds;
* ``all items differ by the same amount (+1.000 each)`` — a zero-width interval away from 0: every paired
  difference is that one value (``[1, 1]``: every item gained the whole scale). Not a defect of the interval
  but the plainest evidence there is; it counts by its bounds too;
* ``CI > 0``, ``CI < 0``, ``CI includes 0``.

Then the model's verdict (:func:`verdicts`), over the differences with at least ``min_items`` items of
each protocol's primary metric (the first of its kind's listening figures it has, ``ProtocolKind.listening``; a
free-form protocol without any of them: its first metric, every free-form metric being a similarity). Where a judge follows a benchmark's published
rule, the protocol has that metric twice — the published verdict's (``accuracy``, the headline figure, the one a
paper prints) and evalcore's strict reading's (``accuracy_strict``) — and the listening verdict reads the **strict**
one (:func:`primary_of`): whether a model listens is evalcore's own inference, and it should rest neither on a
tie broken by option position (a guess after shuffling) nor on a rule crediting a response for two options.

* **yes** — some difference has its CI entirely above 0;
* **no** — none has, and at least one was measured on enough items: no control shows a benefit of the
  correct audio (absence of evidence at this n, not proof of deafness);
* **unclear** — no difference has enough items (or none was computed).

The one or two differences that decide it are named with their CIs (for yes: the highest lower bounds,
one per protocol instance, non-degenerate ones first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from evalcore.conditions.base import known
from evalcore.kinds.base import kind_of
from evalcore.reports.browser_links import difference_href, evidence_href, items_href
from evalcore.core.schema import strict_name

__all__ = ["MIN_ITEMS", "PRIMARY", "RULE", "Verdict", "ci_over", "degenerate", "describe", "interval_label",
           "listening_rows", "primary_of", "section", "paired_test_label", "verdict", "verdict_lines", "verdicts"]

#: default of ``stats.min_items``: the fewest paired items a difference needs to decide a verdict
MIN_ITEMS = 20
#: a protocol's primary metric for the verdict when its kind is not known here (rows of another version's tables):
#: the first of these its differences have; a known kind's own are :attr:`evalcore.kinds.base.ProtocolKind.listening`
PRIMARY = ("accuracy", "f1_micro", "accuracy_majority", "accuracy_any", "f1_macro", "bleu", "consistency",
           # the mir protocol's figures (CMI-Bench's rules), each higher-is-better (lyrics: word_accuracy = 1 − WER)
           "key_weighted_score", "f_measure", "word_accuracy", "melody_accuracy", "frame_f1_micro", "r2", "roc_auc")

#: how the verdict is decided, one list item each ({m}: stats.min_items)
RULE = ("**yes**: some difference has its CI entirely above 0, over at least {m} paired items",
        "**no**: none has, and at least one difference had {m} or more items (no control shows a benefit of the "
        "correct audio at this n; not proof that the model is deaf)",
        "**unclear**: no difference has {m} items",
        "a difference over fewer than {m} items is shown but decides nothing; a zero-width interval is flagged "
        "*degenerate* (at 0: no item differs; else every item differs by the same amount) and counts by its bounds")


def _nan(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def degenerate(lo: Any, hi: Any) -> bool:
    """A zero-width interval: every bootstrap resample gave the same value."""
    return not _nan(lo) and not _nan(hi) and lo == hi


def interval_label(value: Any, lo: Any, hi: Any, n: Any, min_items: int = MIN_ITEMS) -> str:
    """What a paired difference's CI says, with tiny-n and zero-width intervals flagged."""
    if _nan(value) or _nan(lo) or _nan(hi):
        return "n/a"
    n = int(n or 0)
    if n < min_items:
        return f"too few items (n={n} < {min_items})"
    if degenerate(lo, hi):
        if lo != 0:  # every paired difference is this one nonzero value: plain, not a broken interval
            return f"all items differ by the same amount ({lo:+.3f} each)"
        return f"degenerate [{lo:.3f}, {hi:.3f}] (every resample equal; no difference on any item)"
    return "CI > 0" if lo > 0 else ("CI < 0" if hi < 0 else "CI includes 0")


def ci_over(r: Any) -> str:
    """What a row's CI resampled: ``"44 clips"`` / ``"132 items"`` (``""`` for rows of runs before ``ci_unit``)."""
    unit, k = getattr(r, "ci_unit", None), getattr(r, "clusters", None)
    if not isinstance(unit, str) or not unit or _nan(k):
        return ""
    return f"{int(k)} {unit}{'' if int(k) == 1 else 's'}"


def paired_test_label(r: Any) -> str:
    """A paired difference's test: ``McNemar exact, p (Holm) 0.012`` or ``paired bootstrap`` (its CI decides)."""
    test = getattr(r, "test", None)
    if test == "mcnemar_exact":
        p = getattr(r, "p_adjusted", None)
        return "McNemar exact, p (Holm) " + ("—" if _nan(p) else "< 0.001" if p < 0.001 else f"{p:.3g}")
    return "paired bootstrap" if test == "paired_bootstrap" else ""


def _href(r: Any) -> str:
    """The item browser filtered to the items behind a paired difference."""
    return difference_href(r.protocol, r.dataset, r.model, r.variant, r.condition)


def _decides(r: Any, min_items: int) -> bool:
    return not (_nan(r.value) or _nan(r.ci_low) or _nan(r.ci_high)) and int(r.n or 0) >= min_items


def listening_rows(summary: pd.DataFrame, exclude: Iterable[str] = ()) -> pd.DataFrame:
    """The paired differences correct − control of each protocol instance's primary metric, over all items
    (``group = all``), leaving out the models in ``exclude`` (e.g. reference-rewrite systems)."""
    if summary.empty or "kind" not in summary.columns:
        return summary.iloc[0:0]
    d = summary[(summary["kind"] == "paired_diff") & (summary["group"] == "all")
                & summary["condition"].map(is_control_contrast) & ~summary["model"].isin(list(exclude))]
    keep = []
    for _, g in d.groupby(["protocol", "dataset"], sort=True):
        primary = primary_of(g)
        if primary is not None:
            keep.append(g[g["metric"] == primary])
    return pd.concat(keep) if keep else d.iloc[0:0]


def is_control_contrast(contrast: Any) -> bool:
    """Whether a paired difference's ``condition`` is correct − a control (a condition that takes the clip's
    information away: :attr:`evalcore.conditions.base.Condition.control`; a segment keeps part of it, and its
    difference belongs to the listening curve, not to the verdict)."""
    first, _, other = str(contrast).partition("-")
    if first != "correct" or not other:
        return False
    c = known(other)
    return c is not None and c.control


def primary_of(rows: pd.DataFrame) -> str | None:
    """The metric the listening verdict reads of one protocol instance's rows: the first of its kind's listening
    figures (:attr:`~evalcore.kinds.base.ProtocolKind.listening`; :data:`PRIMARY` for a kind not known here) they
    have — its strict twin where a published rule gives both (``accuracy_strict``) —, else a free-form protocol's
    first metric; None for rows with none."""
    metrics = set(rows["metric"])
    kinds = set(rows["protocol_kind"]) if "protocol_kind" in rows.columns else set()
    spec = kind_of(next(iter(kinds))) if len(kinds) == 1 else None
    primary = next((m for m in (spec.listening if spec is not None else PRIMARY) if m in metrics), None)
    freeform = len(rows) and spec is not None and spec.text_metrics
    if primary is None and freeform:
        return str(rows["metric"].iloc[0])  # every free-form metric is a similarity: the first configured
    if primary is not None and strict_name(primary) in metrics:
        return strict_name(primary)
    return primary


@dataclass
class Verdict:
    """A model's verdict and the differences that decide it (rows of the summary)."""

    model: str
    listens: str  # yes | no | unclear
    deciding: list[Any] = field(default_factory=list)
    min_items: int = MIN_ITEMS

    def because(self) -> str:
        """The deciding differences, e.g. ``mcq · synth accuracy correct−random +0.538 [+0.447, +0.629], n=132``."""
        return "; ".join(describe(r, self.min_items) for r in self.deciding) or "no paired difference computed"


def describe(r: Any, min_items: int = MIN_ITEMS) -> str:
    """One difference in words, with its CI, n and label."""
    variant = "" if r.variant in (None, "", "default") else f" ({r.variant})"
    contrast = str(r.condition).replace("-", " − ", 1)
    ci = "n/a" if _nan(r.value) else f"{r.value:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]"
    return (f"{r.protocol} · {r.dataset}{variant} {r.metric} {contrast} {ci}, n={int(r.n or 0)} — "
            f"{interval_label(r.value, r.ci_low, r.ci_high, r.n, min_items)}")


def _one_per_protocol(rows: list[Any], top: int) -> list[Any]:
    out, seen = [], set()
    for r in rows:
        if (r.protocol, r.dataset) not in seen:
            seen.add((r.protocol, r.dataset))
            out.append(r)
    return out[:top]


def verdict(model: str, rows: pd.DataFrame, min_items: int = MIN_ITEMS, top: int = 2) -> Verdict:
    """The verdict of one model from its listening rows (:func:`listening_rows`)."""
    every = list(rows.itertuples())
    enough = [r for r in every if _decides(r, min_items)]
    above = [r for r in enough if r.ci_low > 0]
    if above:
        ranked = sorted(above, key=lambda r: (degenerate(r.ci_low, r.ci_high), -r.ci_low, -r.n))
        return Verdict(model, "yes", _one_per_protocol(ranked, top), min_items)
    if enough:  # the differences closest to showing a benefit
        ranked = sorted(enough, key=lambda r: (degenerate(r.ci_low, r.ci_high), -r.ci_high, -r.n))
        return Verdict(model, "no", _one_per_protocol(ranked, top), min_items)
    ranked = sorted(every, key=lambda r: (-(r.n or 0), -(0 if _nan(r.ci_low) else r.ci_low)))
    return Verdict(model, "unclear", _one_per_protocol(ranked, top), min_items)


def verdicts(summary: pd.DataFrame, min_items: int = MIN_ITEMS, exclude: Iterable[str] = (),
             models: Iterable[str] = ()) -> list[Verdict]:
    """One verdict per model of ``summary`` (and per name of ``models`` that has no difference: unclear)."""
    rows = listening_rows(summary, exclude)
    found = sorted(rows["model"].unique()) if "model" in rows.columns else []
    names = list(dict.fromkeys([*found, *[m for m in models if m not in set(exclude)]]))
    return [verdict(m, rows[rows["model"] == m] if found else rows, min_items) for m in names]


def verdict_lines(summary: pd.DataFrame, min_items: int = MIN_ITEMS, exclude: Iterable[str] = ()) -> list[str]:
    """``<model>: listens yes — <deciding differences>``, one line per model (for the console)."""
    return [f"{v.model}: listens {v.listens} — {v.because()}" for v in verdicts(summary, min_items, exclude)]


def section(summary: pd.DataFrame, conf: int, min_items: int = MIN_ITEMS, exclude: Iterable[str] = ()) -> list[str]:
    """The report's opening section: the verdict per model, the rule and what n means."""
    found = verdicts(summary, min_items, exclude)
    if not found:
        return []
    out = ["", "## Does it listen?", ""]
    for v in found:  # each with links into the item browser (items.html, beside the report)
        out.append(f"* **{v.model}** — listens: **{v.listens}** · [its items]({items_href(m=v.model)}), "
                   f"[its evidence of not listening]({evidence_href(v.model)})")
        out += [f"  * {describe(r, min_items)} · [listen to the items]({_href(r)})" for r in v.deciding]
    out += ["", f"How the verdict is decided, from the differences correct − control audio of each protocol's "
                f"primary metric over the same items ({conf} % bootstrap CI; the minimum is `stats.min_items` "
                f"({min_items})):", ""]
    out += [f"* {rule.format(m=min_items)}" for rule in RULE]
    out += ["", "**n** counts items (questions, clips), not requests: a cell's n is its items with a scored request; "
                "errored requests are left out (counted in `errored`); a paired difference's n is the items scored "
                "under both conditions, so it can be smaller than either cell's (e.g. correct − random loses the "
                "items whose random partner failed to decode). Rows therefore differ in n."]
    return out
