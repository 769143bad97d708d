"""The report's section on the items that need the audio: per benchmark, how many items an answer without audio got
right (and whose answers), and each model's primary figure over all items beside the audio-required ones only, with
its CI (``tables/audio_required.parquet``, :mod:`evalcore.scoring.audio_required`)."""

from __future__ import annotations

import math

import pandas as pd

from evalcore.reports import md
from evalcore.reports.verdict import primary_of

__all__ = ["section"]

SHARE = "answerable_without_audio"


def section(required: pd.DataFrame | None, summary: pd.DataFrame, conf: int) -> list[str]:
    """The section (none when the run answered nothing without audio)."""
    if required is None or required.empty:
        return []
    shares = required[required["metric"] == SHARE]
    out = md.opening("Which items need the audio?",
                     "An item is answerable without audio when some answer given without hearing it was right: under "
                     "`text_only`, or by a model that reads no audio, over every option order and variant. Each "
                     "model's primary figure over every item and over the audio-required items only (the others left "
                     f"out), with its {conf} % CI; `evalcore subset RUN --out FILE` writes the audio-required items "
                     "in the benchmark's own format (docs/listening.md).")
    rows = []
    for s in shares.itertuples():
        n, share = int(s.n), float(s.value)
        out.append(f"* {s.protocol} · {s.dataset}: {round(share * n)} of {n} items ({share:.0%}) answerable without "
                   f"audio; {n - round(share * n)} need it")
        mine = required[(required["protocol"] == s.protocol) & (required["dataset"] == s.dataset)
                        & (required["metric"] != SHARE)]
        whole = summary[(summary["protocol"] == s.protocol) & (summary["dataset"] == s.dataset)
                        & (summary["group"] == "all") & (summary["kind"] == "value")]
        metric = primary_of(whole) if len(whole) else None
        if metric is None:
            continue
        left = mine[(mine["kind"] == "value") & (mine["metric"] == metric) & (mine["condition"] == "correct")]
        every = whole[(whole["metric"] == metric) & (whole["condition"] == "correct")].set_index(["model", "variant"])
        for r in left.itertuples():
            base = every.loc[(r.model, r.variant)] if (r.model, r.variant) in every.index else None
            rows.append([r.model, f"{s.protocol} · {s.dataset}", r.variant, metric,
                         "n/a" if base is None else md.ci(base.value, base.ci_low, base.ci_high),
                         md.ci(r.value, r.ci_low, r.ci_high), 0 if r.n is None or math.isnan(r.n) else int(r.n)])
    if rows:
        out += [""] + md.table(["model", "benchmark", "variant", "metric", "every item", "audio-required items", "n"],
                               rows)
    return out
