"""How much of the clip does a model need? The listening curve, read off a run's summary.

A curve is one model's primary figure on one benchmark (the metric the listening verdict reads,
:func:`evalcore.reports.verdict.primary_of`) against the share of the item's clip it heard: 0 (no audio — the
``text_only`` condition where the run has it, else ``silence``), the segments of one position (``first_10``,
``first_25`` … as :meth:`evalcore.conditions.base.Condition.kept` gives their share), and 1 (``correct``). Each
point carries its value with its CI and the paired difference correct − that condition with its CI, from the
summary's ``paired_diff`` rows (the same items under both, the run's bootstrap).

Where the curve stops rising (:meth:`Curve.line`): the smallest share from which no segment scores below the whole
clip (each difference correct − segment has a CI that reaches 0), said with the share of the whole clip's score it
gives and, with a no-audio point, the share of what the whole clip adds over no audio. A curve whose whole clip
scores no better than no audio is called flat: it says nothing of how much of the clip the model needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from evalcore.conditions.base import known
from evalcore.reports import md
from evalcore.reports.verdict import primary_of

__all__ = ["Point", "Curve", "curves", "section"]

INTRO = ("Each model's primary figure against the share of the clip it heard: no audio (0), the segments (the first, "
         "middle or last part of each clip; the rest is cut) and the whole clip (1). Each segment's paired difference "
         "correct − segment over the same items, with its {conf} % CI, says whether the model still loses something "
         "without the rest of the clip; the curve stops rising at the smallest share from which no segment scores "
         "below the whole clip.")


@dataclass(frozen=True)
class Point:
    """One condition on a curve: its share of the clip, its value (CI) and correct − it (CI, n)."""

    condition: str
    kept: float
    value: float
    ci_low: float
    ci_high: float
    n: int
    diff: float = math.nan  # correct − this condition over the same items (NaN for correct itself)
    diff_low: float = math.nan
    diff_high: float = math.nan
    diff_n: int = 0

    def below_whole(self) -> bool:
        """Whether it scores below the whole clip: the CI of correct − it lies above 0."""
        return not math.isnan(self.diff_low) and self.diff_low > 0


@dataclass(frozen=True)
class Curve:
    """One model × benchmark × prompt variant × position: its points, from no audio to the whole clip."""

    protocol: str
    dataset: str
    model: str
    variant: str
    position: str
    metric: str
    points: tuple[Point, ...]

    @property
    def label(self) -> str:
        variant = "" if self.variant in ("", "default") else f" ({self.variant})"
        return f"{self.model} · {self.protocol} · {self.dataset}{variant}"

    def zero(self) -> Point | None:
        return self.points[0] if self.points[0].kept == 0 else None

    def whole(self) -> Point:
        return self.points[-1]

    def segments(self) -> list[Point]:
        return [p for p in self.points if 0 < p.kept < 1]

    def knee(self) -> Point | None:
        """The smallest segment from which no segment scores below the whole clip (None: the largest does)."""
        segs = self.segments()
        return next((s for i, s in enumerate(segs) if not any(t.below_whole() for t in segs[i:])), None)

    def flat(self) -> bool:
        """The whole clip scores no better than no audio (correct − no audio has a CI reaching 0)."""
        zero = self.zero()
        return zero is not None and not zero.below_whole()

    def line(self) -> str:
        """Where the curve stops rising, in one line."""
        zero, whole = self.zero(), self.whole()
        if zero is not None and self.flat():
            return (f"{self.label}: flat — the whole clip scores no better than no audio ({self.metric} correct − "
                    f"{zero.condition} {_diff(zero)}), so the curve says nothing of how much of the clip it needs")
        knee = self.knee()
        point = knee or self.segments()[-1]
        share = f"{point.value / whole.value:.0%} of the score" if whole.value else "a score of 0"
        if zero is not None and whole.value != zero.value:
            gain = (point.value - zero.value) / (whole.value - zero.value)
            share += f" ({gain:.0%} of what the clip adds over no audio)"
        where = f"the {self.position} {point.kept:.0%}"
        if knee is None:
            return (f"{self.label}: still rising at {where}, which gives {share}: the whole clip scores higher "
                    f"({self.metric} correct − {point.condition} {_diff(point)})")
        return (f"{self.label}: {where} gives {share}; from there on no segment scores below the whole clip "
                f"({self.metric} correct − {point.condition} {_diff(point)})")


def _diff(p: Point) -> str:
    return "n/a" if math.isnan(p.diff) else f"{md.ci(p.diff, p.diff_low, p.diff_high, signed=True)}, n={p.diff_n}"


def _num(v: Any) -> float:
    return math.nan if v is None or pd.isna(v) else float(v)


def _int(v: Any) -> int:
    return 0 if v is None or pd.isna(v) else int(v)


def _kept(name: str) -> tuple[float | None, str | None, bool]:
    """(share kept, position, hears) of a condition written in a summary (unknown names: not on a curve)."""
    c = known(name)
    return (None, None, True) if c is None else (c.kept(), c.position(), c.hears)


def curves(summary: pd.DataFrame) -> list[Curve]:
    """Every curve a summary holds: one per model × benchmark × variant × segment position with a ``correct``
    value and at least one segment of that position."""
    if summary.empty or "kind" not in summary.columns:
        return []
    rows = summary[summary["group"] == "all"]
    out: list[Curve] = []
    for (proto, ds), g in rows.groupby(["protocol", "dataset"], sort=True):
        metric = primary_of(g)
        if metric is None:
            continue
        g = g[g["metric"] == metric]
        values = g[g["kind"] == "value"]
        diffs = {(r.model, r.variant, str(r.condition).partition("-")[2]): r
                 for r in g[(g["kind"] == "paired_diff") & g["condition"].astype(str).str.startswith("correct-")]
                 .itertuples()}
        for (model, variant), v in values.groupby(["model", "variant"], sort=True):
            out += _curves_of(str(proto), str(ds), str(model), str(variant), metric, v, diffs)
    return out


def _curves_of(proto: str, ds: str, model: str, variant: str, metric: str, values: pd.DataFrame,
               diffs: dict[tuple, Any]) -> list[Curve]:
    """The curves of one model × benchmark × variant (one per segment position present)."""
    by_cond = {str(r.condition): r for r in values.itertuples()}
    if "correct" not in by_cond:
        return []

    def point(name: str, kept: float) -> Point:
        r, d = by_cond[name], diffs.get((model, variant, name))
        extra = {} if d is None else {"diff": _num(d.value), "diff_low": _num(d.ci_low),
                                      "diff_high": _num(d.ci_high), "diff_n": _int(d.n)}
        return Point(name, kept, _num(r.value), _num(r.ci_low), _num(r.ci_high), _int(r.n), **extra)

    known = {name: _kept(name) for name in by_cond}
    # no audio: text_only (nothing heard) before silence (zeros heard)
    zeros = sorted((hears, name) for name, (kept, _, hears) in known.items() if kept == 0)
    zero = [point(zeros[0][1], 0.0)] if zeros else []
    positions = dict.fromkeys(pos for kept, pos, _ in known.values() if pos is not None and kept is not None)
    out = []
    for pos in positions:
        segs = sorted((kept, name) for name, (kept, p, _) in known.items() if p == pos and kept is not None)
        points = (*zero, *(point(name, kept) for kept, name in segs), point("correct", 1.0))
        out.append(Curve(proto, ds, model, variant, str(pos), metric, points))
    return out


def section(summary: pd.DataFrame, conf: int) -> list[str]:
    """The report's section: one line per curve saying where it stops rising, then every point."""
    found = curves(summary)
    if not found:
        return []
    out = md.opening("How much of the clip does it need? Listening curves", INTRO.format(conf=conf))
    out += [f"* {line}" for line in dict.fromkeys(c.line() for c in found)]  # a flat model's line once per benchmark
    rows = [[c.model, f"{c.protocol} · {c.dataset}", c.variant, c.position, f"{p.kept:.0%}", p.condition,
             _value(p), _diff(p) if p.condition != "correct" else "–"] for c in found for p in c.points]
    return out + [""] + md.table(["model", "benchmark", "variant", "position", "clip heard", "condition", "value",
                                  "correct − it"], rows)


def _value(p: Point) -> str:
    return md.ci(p.value, p.ci_low, p.ci_high)
