"""The model-card table: the music table a model report prints — one row per benchmark (or CMI-Bench task) with
the metric its benchmark publishes, one column per model — with what no report prints: each value's CI, whether
the model listened, and the published value beside it where one exists.

A cell reads ``0.673 [0.556, 0.832] ✓ · pub. 0.624``:

* the value and CI of the row's metric with the correct audio (``group = all``) — the first of :data:`CARD_METRICS`
  the row has (its benchmark's published metric: lyrics show WER, not the verdict's word accuracy), else the
  protocol's first metric;
* the listening mark of that model on that row, from the same paired differences correct − control as the
  verdict (:func:`evalcore.reports.verdict.listening_rows`, each row's higher-is-better primary metric): ``✓`` some
  control's CI lies above 0, ``✗`` none does though one had ``min_items`` paired items, ``?`` too few items to say;
* ``strict 0.515 · 17 differ``: where the row's judge follows a benchmark's published rule, the value above is that
  rule's verdict (quirks included, the figure a paper prints) and this is evalcore's strict reading of it, with the
  items the two judge differently (linked to them in the item browser; :mod:`evalcore.reports.readings`). The
  listening mark reads the strict figure (:func:`evalcore.reports.verdict.primary_of`);
* ``pub.``: the published value for that row, metric and model (``model_card.published``, a CSV of ``dataset,
  model, metric, value, source`` in the config's own names), where one exists.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any, Iterable

import pandas as pd

from evalcore.reports import readings
from evalcore.reports.verdict import MIN_ITEMS, interval_label, listening_rows
from evalcore.schema import PROTOCOLS

__all__ = ["CARD_METRICS", "MARKS", "read_published", "cells", "section"]

#: a row's metric, the first its summary rows have: the metric each benchmark publishes
CARD_METRICS = ("accuracy", "key_weighted_score", "f_measure", "wer", "melody_accuracy", "frame_f1_micro", "r2",
                "roc_auc", "f1_micro", "accuracy_majority", "bleu", "meteor", "rouge")
MARKS = {"yes": "✓", "no": "✗", "unclear": "?"}
PUBLISHED_FIELDS = ("dataset", "model", "metric", "value", "source")


def read_published(text: str) -> list[dict[str, str]]:
    """The rows of a published-values CSV (:data:`PUBLISHED_FIELDS`); raises ``ValueError`` naming what is wrong."""
    reader = csv.DictReader(io.StringIO(text))
    missing = [f for f in PUBLISHED_FIELDS if f not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"published values: missing column(s) {missing}")
    rows = [dict(r) for r in reader]
    for n, r in enumerate(rows, 2):
        try:
            float(r["value"])
        except (TypeError, ValueError):
            raise ValueError(f"published values line {n}: value {r['value']!r} is not a number") from None
    return rows


def _fmt(v: Any) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


def _mark(diffs: pd.DataFrame, min_items: int) -> str:
    """✓ / ✗ / ? of one model's paired differences on one row."""
    labels = [interval_label(r.value, r.ci_low, r.ci_high, r.n, min_items) for r in diffs.itertuples()]
    deciding = [lab for lab in labels if not lab.startswith(("too few", "n/a"))]
    if any(lab == "CI > 0" or lab.startswith("all items differ by the same amount (+") for lab in deciding):
        return MARKS["yes"]
    return MARKS["no"] if deciding else MARKS["unclear"]


def cells(summary: pd.DataFrame, published: Iterable[dict[str, str]] = (), min_items: int = MIN_ITEMS,
          exclude: Iterable[str] = ()) -> tuple[list[str], list[list[str]]]:
    """(models, rows): each row ``[benchmark, metric, cell per model]`` (module docstring)."""
    if summary.empty:
        return [], []
    excluded = set(exclude)
    vals = summary[(summary["kind"] == "value") & (summary["group"] == "all") & (summary["condition"] == "correct")
                   & ~summary["model"].isin(excluded)]
    models = sorted(vals["model"].unique())
    listen = listening_rows(summary, excluded)
    pub = {(p["dataset"], p["model"], p["metric"]): float(p["value"]) for p in published}
    twins = readings.pairs(summary)
    kind_of: dict[tuple[str, str], str] = {}
    for r in vals.itertuples():  # a row's kind: its protocol's (rows a scorer did not write may lack it)
        kind = getattr(r, "protocol_kind", None)
        if kind in PROTOCOLS:
            kind_of[(r.protocol, r.dataset)] = kind
        else:
            kind_of.setdefault((r.protocol, r.dataset), "")
    order = {"mcq": 0, "mir": 1, "freeform": 2}
    keys = sorted(((p, d, k) for (p, d), k in kind_of.items()), key=lambda k: (order.get(k[2], 3), k[0], k[1]))
    rows = []
    for proto, ds, _ in keys:
        here = vals[(vals["protocol"] == proto) & (vals["dataset"] == ds) & (vals["metric"] != "errored")]
        metric = next((m for m in CARD_METRICS if (here["metric"] == m).any()), None)
        if metric is None and len(here):
            metric = str(here["metric"].iloc[0])
        if metric is None:
            continue
        row = [ds if ds == proto else f"{ds} ({proto})", metric]
        for model in models:
            v = here[(here["metric"] == metric) & (here["model"] == model)]
            if v.empty:
                row.append("—")
                continue
            r = v.iloc[0]
            text = _fmt(r.value) + ("" if pd.isna(r.ci_low) else f" [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]")
            text += " " + _mark(listen[(listen["protocol"] == proto) & (listen["dataset"] == ds)
                                       & (listen["model"] == model)], min_items)
            if metric == readings.METRIC:
                text += readings.note(twins.get((proto, ds, model, r.variant, "correct")))
            if (ds, model, metric) in pub:
                text += f" · pub. {_fmt(pub[(ds, model, metric)])}"
            row.append(text)
        rows.append(row)
    return models, rows


def section(summary: pd.DataFrame, card: dict[str, Any] | None, min_items: int = MIN_ITEMS,
            exclude: Iterable[str] = ()) -> list[str]:
    """The report's "Model card" section (Markdown lines); none without ``card`` (the run's ``model_card``)."""
    if card is None:
        return []
    models, rows = cells(summary, card.get("values") or [], min_items, exclude)
    if not rows:
        return []
    sources = sorted({p.get("source", "") for p in card.get("values") or [] if p.get("source")})
    out = ["", "## Model card", "",
           "One row per benchmark or task, with the metric it publishes; one column per model. A cell: value "
           "[95 % CI] with the correct audio, then whether the model listened on that row (✓ a control's paired "
           f"difference has its CI above 0; ✗ none has, over at least {min_items} paired items; ? too few items), "
           "then, where the judge follows a benchmark's published rule, evalcore's strict reading of it and the items "
           "the two judge differently (the value first is the rule's own; the mark reads the strict one), then the "
           "published value (pub.) where one exists. WER is lower-is-better; every other metric here is "
           "higher-is-better.", "",
           "| benchmark | metric | " + " | ".join(models) + " |", "|---|---|" + "---|" * len(models)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    if sources:
        out += ["", "Published values: " + "; ".join(sources) + "."]
    return out
