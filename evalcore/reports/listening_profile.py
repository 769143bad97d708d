"""One model's listening profile, in one row: what the audio controls say (the verdict), how much of the clip it
needs (the listening curve's knee), whether the clip beats a description of it, how robust it is to paraphrases, and
its score on the items that need the audio. The report shows the table on its first screen, after the verdict; the
model card says each model's profile in one line. Each part is read off what its own section computes
(:mod:`~evalcore.reports.verdict`, :mod:`~evalcore.reports.listening_curve`, :mod:`~evalcore.reports.description`,
``tables/audio_required.parquet``); a part the run did not measure is a dash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import pandas as pd

from evalcore.reports import description, listening_curve, md, verdict
from evalcore.reports.verdict import MIN_ITEMS, primary_of

__all__ = ["Profile", "profiles", "section", "card_lines"]

#: benchmarks named per part at most (the rest counted)
SHOWN = 3
DASH = "–"


@dataclass(frozen=True)
class Profile:
    """One model's profile, each part a short phrase (``–``: not measured by this run)."""

    model: str
    listens: str
    needs: str = DASH
    description: str = DASH
    paraphrase: str = DASH
    audio_required: str = DASH

    def line(self) -> str:
        """The profile in one line (the model card's)."""
        return (f"**{self.model}** — listens: {self.listens}; clip needed: {self.needs}; whole clip vs a "
                f"description: {self.description}; paraphrases: {self.paraphrase}; on audio-required items: "
                f"{self.audio_required}")


def _joined(parts: list[str]) -> str:
    if not parts:
        return DASH
    return "; ".join(parts[:SHOWN]) + (f"; +{len(parts) - SHOWN} more" if len(parts) > SHOWN else "")


def _knee(curve: listening_curve.Curve) -> str:
    """Where one curve stops rising, in a few words."""
    if curve.flat():
        return "flat (the clip adds nothing)"
    knee = curve.knee()
    if knee is None:
        return f"still rising at the {curve.position} {curve.segments()[-1].kept:.0%}"
    return f"the {curve.position} {knee.kept:.0%}"


def _needs(curves: list[listening_curve.Curve]) -> list[str]:
    """Per benchmark, where each position's curve stops rising (a flat benchmark said once)."""
    by: dict[str, list[str]] = {}
    for c in curves:
        by.setdefault(f"{c.protocol} · {c.dataset}", []).append(_knee(c))
    return [f"{where}: {', '.join(dict.fromkeys(knees))}" for where, knees in by.items()]


def _required(rows: pd.DataFrame, model: str) -> list[str]:
    out = []
    shares = rows[rows["metric"] == "answerable_without_audio"]
    for s in shares.itertuples():
        mine = rows[(rows["protocol"] == s.protocol) & (rows["dataset"] == s.dataset) & (rows["model"] == model)
                    & (rows["condition"] == "correct") & (rows["kind"] == "value")]
        metric = primary_of(mine) if len(mine) else None
        got = mine[mine["metric"] == metric] if metric else mine.iloc[0:0]
        if len(got):
            r = got.iloc[0]
            out.append(f"{s.protocol} · {s.dataset}: {metric} {r.value:.3f} on {int(r.n)} of {int(s.n)} items")
    return out


def _paraphrased(summary: pd.DataFrame, model: str) -> list[str]:
    """Per benchmark: the consistency of the model's choices across paraphrases and option orders, with its CI."""
    rows = summary[(summary["model"] == model) & (summary["metric"] == "paraphrase_consistency")
                   & (summary["group"] == "all")] if "metric" in summary.columns else summary.iloc[0:0]
    return [f"{r.protocol} · {r.dataset}: consistency {r.value:.2f} [{r.ci_low:.2f}, {r.ci_high:.2f}]"
            for r in rows.itertuples()]


def profiles(summary: pd.DataFrame, required: pd.DataFrame | None = None, min_items: int = MIN_ITEMS,
             exclude: Iterable[str] = ()) -> list[Profile]:
    """Every model's profile (the models the listening verdict reads: not ``exclude``, e.g. rewrite systems)."""
    listens = {v.model: v.listens for v in verdict.verdicts(summary, min_items, exclude)}
    models = [m for m in dict.fromkeys(summary["model"].astype(str)) if m and m not in set(exclude)] \
        if len(summary) else []
    curves, diffs = listening_curve.curves(summary), description.differences(summary)
    out = []
    for model in models:
        needs = _needs([c for c in curves if c.model == model])
        desc = [f"{r.protocol} · {r.dataset}: {description.verdict(r.value, r.ci_low, r.ci_high)} "
                f"({r.value:+.3f})" for r in diffs if r.model == model]
        req = _required(required, model) if required is not None and not required.empty else []
        out.append(Profile(model, listens.get(model, DASH), _joined(needs), _joined(desc),
                           _joined(_paraphrased(summary, model)), _joined(req)))
    return out


def measured(found: list[Profile]) -> bool:
    """Whether the run measured any part beyond the verdict (else the profile repeats the verdict)."""
    return any(x != DASH for p in found for x in (p.needs, p.description, p.paraphrase, p.audio_required))


def section(summary: pd.DataFrame, required: pd.DataFrame | None, min_items: int = MIN_ITEMS,
            exclude: Iterable[str] = ()) -> list[str]:
    """The report's table, one row per model (none when the run measured nothing beyond the verdict)."""
    found = profiles(summary, required, min_items, exclude)
    if not measured(found):
        return []
    rows = [[p.model, p.listens, p.needs, p.description, p.paraphrase, p.audio_required] for p in found]
    intro = ("Per model: the verdict of the audio controls; how much of the clip it needs (where its listening curve "
             "stops rising); whether the whole clip beats a description of it; its robustness to paraphrases; its "
             "primary figure on the items no answer without audio got right. Each has its own section below; "
             f"{DASH} where the run did not measure it.")
    return md.opening("Listening profile", intro) + md.table(
        ["model", "listens", "clip needed", "whole clip vs a description", "paraphrases", "on audio-required items"],
        rows)


def _merged(model: str, parts: list[Profile]) -> Profile:
    """The profiles of the run's entries that are one model (the card's column), as that model's."""
    def joined(values: list[str]) -> str:
        return _joined([v for v in dict.fromkeys(values) if v != DASH]) if any(v != DASH for v in values) else DASH

    return Profile(model, joined([p.listens for p in parts]), joined([p.needs for p in parts]),
                   joined([p.description for p in parts]), joined([p.paraphrase for p in parts]),
                   joined([p.audio_required for p in parts]))


def card_lines(summary: pd.DataFrame, required: pd.DataFrame | None, min_items: int = MIN_ITEMS,
               exclude: Iterable[str] = (), columns: dict[str, str] | None = None) -> list[str]:
    """The model card's lines: one per model as the card names it (``columns``: run entry → the card's column; the
    entries of one column merged), none when the run measured nothing beyond the verdict."""
    found = profiles(summary, required, min_items, exclude)
    if not measured(found):
        return []
    by: dict[str, list[Profile]] = {}
    for p in found:
        by.setdefault((columns or {}).get(p.model, p.model), []).append(p)
    return ["", "Listening profile:", "", *(f"* {_merged(m, ps).line()}" for m, ps in by.items())]
