"""The model-card table: the music table a model report prints — one row per benchmark (or CMI-Bench task) with
the metric its benchmark publishes, one column per model, and published reference columns — with what no report
prints: each value's CI and whether the model listened.

* **Rows**, grouped as the report groups them: the multiple-choice benchmarks, then the MIR tasks, then captioning
  (then any other protocol); each names its benchmark (dataset, and protocol instance where they differ), its task
  (the items' tasks and, for a CMI-Bench task, its rule's family: ``GTZAN · classification``) and its metric.
* **The metric** is the benchmark's own: the first of :data:`CARD_METRICS` among the figures its scorer reports
  (run.json's ``benchmarks``: :mod:`evalcore.pipeline.benchmarks`), whatever its requests did — lyrics show WER,
  not the verdict's word accuracy, and a benchmark whose every request errored keeps its metric.
* **One column per model**: a run's entries that are one model (``models[].model``: a replay of its outputs per
  benchmark, a stand-in per benchmark) are one column, named as the config names the model.
* **A cell** reads ``0.673 [0.556, 0.832] ✓``: the value and CI of the row's metric with the correct audio
  (``group = all``), then the listening mark of that model on that row, from the same paired differences
  correct − control as the verdict (:func:`evalcore.reports.verdict.listening_rows`): ``✓`` some control's CI lies
  above 0, ``✗`` none does though one had ``min_items`` paired items, ``?`` too few items to say. Where the row's
  judge follows a benchmark's published rule, the value is that rule's verdict and `` · strict 0.515 · 17 differ``
  follows (evalcore's strict reading, the items the two judge differently: :mod:`evalcore.reports.readings`; the
  mark reads the strict figure). A cell with no scored request reads ``—, all 90 errored`` (never a number over
  no item); a model not asked on that row, ``—``.
* **Published columns**, one per model the published values hold (``model_card.published``: a CSV of ``dataset,
  model, metric, value, source`` and an optional ``note``, in the config's dataset names), headed
  ``<model> (published)``, whatever models the run evaluates; each value carries its source's number, the sources
  listed under the table.
* A row scored with a stand-in for the published scorer's model (the bag-of-words similarity in place of
  GTE-Qwen2 or NV-Embed-v2) carries ``‡`` after its metric, said under the table.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd

from evalcore.reports import readings
from evalcore.reports.verdict import MIN_ITEMS, interval_label, listening_rows
from evalcore.kinds.base import kind_of as registered_kind
from evalcore.core.schema import ERRORED

__all__ = ["CARD_METRICS", "MARKS", "GROUPS", "Card", "read_published", "build", "cells", "section"]

#: a row's metric, the first its benchmark reports: the metric each benchmark publishes
CARD_METRICS = ("accuracy", "key_weighted_score", "f_measure", "wer", "melody_accuracy", "frame_f1_micro", "r2",
                "roc_auc", "f1_micro", "accuracy_majority", "accuracy_any", "bleu", "meteor", "rouge")
MARKS = {"yes": "✓", "no": "✗", "unclear": "?"}
PUBLISHED_FIELDS = ("dataset", "model", "metric", "value", "source")
#: the card's groups of rows, by protocol kind, in the report's order
GROUPS = {"mcq": "Multiple-choice benchmarks", "mir": "MIR tasks (CMI-Bench)", "freeform": "Captioning"}
OTHER = "Other protocols"
#: a CMI-Bench rule's task family, as a row names it
FAMILIES = {"cmi_multiclass": "classification", "cmi_key": "key", "cmi_beat": "beat tracking",
            "cmi_lyrics": "lyrics transcription", "cmi_melody": "melody extraction",
            "cmi_technique": "playing technique", "cmi_regression": "emotion regression", "cmi_tagging": "tagging"}
STAND_IN_MARK = "‡"
#: tasks a row names before "+ N more"
TASKS_SHOWN = 3


def read_published(text: str) -> list[dict[str, str]]:
    """The rows of a published-values CSV (:data:`PUBLISHED_FIELDS`, and ``note`` where given); raises
    ``ValueError`` naming what is wrong."""
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


@dataclass
class Row:
    """One benchmark's row: its group, names, metric and one cell per column (models, then published)."""

    group: str
    benchmark: str
    task: str
    metric: str
    cells: list[str]
    key: tuple[str, str] = ("", "")
    #: per model column: its listening mark ("" where it has no difference on this row) and the deciding difference
    #: (the one with the highest lower bound), for the card's plot
    marks: list[str] = field(default_factory=list)
    deciding: list[Any] = field(default_factory=list)


@dataclass
class Card:
    """The card: its model columns, its published columns, its rows and what its marks refer to."""

    models: list[str]
    published: list[str]
    rows: list[Row]
    sources: list[str] = field(default_factory=list)  #: [k] under the table, in order
    stand_ins: list[str] = field(default_factory=list)  #: what ‡ stands for

    @property
    def header(self) -> list[str]:
        return ["benchmark", "task", "metric", *self.models, *(f"{m} (published)" for m in self.published)]


def _task(b: dict[str, Any] | None, kind: str) -> str:
    """A row's task: its items' tasks (the first few) and, for a CMI-Bench rule, its family."""
    if not b:
        return ""
    tasks = [str(t) for t in b.get("tasks") or []]
    shown = ", ".join(tasks[:TASKS_SHOWN]) + (f" + {len(tasks) - TASKS_SHOWN} more" if len(tasks) > TASKS_SHOWN
                                              else "")
    spec = registered_kind(kind)
    families = [FAMILIES.get(c, c) for c in b.get("categories") or [] if spec is not None and spec.released_rules]
    if spec is not None and spec.text_metrics:
        families = ["captioning"]
    return " · ".join(x for x in (shown, ", ".join(dict.fromkeys(families))) if x)


def _metric(here: pd.DataFrame, b: dict[str, Any] | None) -> str | None:
    """The row's metric: the first of :data:`CARD_METRICS` its benchmark reports (run.json's figures, else the
    summary's rows), else its first figure; never ``errored`` nor a ``…_with_errors`` twin."""
    own = [str(m) for m in (b or {}).get("figures") or []]
    seen = [m for m in dict.fromkeys(here["metric"].astype(str)) if m != ERRORED and not m.endswith("_with_errors")]
    kind = str(here["protocol_kind"].iloc[0]) if "protocol_kind" in here.columns and len(here) else ""
    fallback = getattr(registered_kind(kind), "card_metric", None)
    for pool in (own, seen, [fallback] if fallback is not None else []):
        found = next((m for m in CARD_METRICS if m in pool), None) or (pool[0] if pool else None)
        if found is not None:
            return found
    return None


def _kinds(vals: pd.DataFrame, benchmarks: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(protocol, dataset) → its kind, for every row of the card."""
    kind_of = {(b["protocol"], b["dataset"]): b.get("kind") or "" for b in benchmarks}
    for r in vals.itertuples():  # rows a scorer did not write may lack their kind
        kind = getattr(r, "protocol_kind", None)
        key = (r.protocol, r.dataset)
        if registered_kind(kind) is not None and not kind_of.get(key):
            kind_of[key] = kind
        kind_of.setdefault(key, "")
    return kind_of


def build(summary: pd.DataFrame, card: dict[str, Any] | None = None, min_items: int = MIN_ITEMS,
          exclude: Iterable[str] = (), benchmarks: Iterable[dict[str, Any]] = ()) -> Card:
    """The card of a run's summary (module docstring). ``card``: run.json's ``model_card`` (``values``: the published
    rows; ``columns``: entry → the model it is); ``benchmarks``: run.json's ``benchmarks``."""
    card = card or {}
    benchmarks = list(benchmarks)
    excluded = set(exclude)
    if summary.empty and not benchmarks:
        return Card([], [], [])
    rows_of = summary[(summary["kind"] == "value") & (summary["group"] == "all") & (summary["condition"] == "correct")
                      & ~summary["model"].isin(excluded)] if len(summary) else summary
    column = {str(m): str((card.get("columns") or {}).get(m) or m) for m in rows_of["model"].unique()} \
        if len(rows_of) else {}
    models = sorted(set(column.values()))
    listen = listening_rows(summary, excluded)
    published = list(dict.fromkeys(p["model"] for p in card.get("values") or []))
    sources: list[str] = []
    pub: dict[tuple[str, str, str], str] = {}
    for p in card.get("values") or []:
        said = p.get("source", "") + (f" ({p['note']})" if p.get("note") else "")
        if said not in sources:
            sources.append(said)
        pub[(p["dataset"], p["model"], p["metric"])] = f"{_fmt(float(p['value']))} [{sources.index(said) + 1}]"
    twins = readings.pairs(summary) if len(summary) else {}
    by_key = {(b["protocol"], b["dataset"]): b for b in benchmarks}
    kind_of = _kinds(rows_of, benchmarks)
    order = list(GROUPS)
    keys = sorted(kind_of, key=lambda k: (order.index(kind_of[k]) if kind_of[k] in order else len(order), k[0], k[1]))
    stand_ins: list[str] = []
    rows = []
    for proto, ds in keys:
        b = by_key.get((proto, ds))
        here = rows_of[(rows_of["protocol"] == proto) & (rows_of["dataset"] == ds)]
        metric = _metric(here, b)
        if metric is None:
            continue
        shown_metric = metric
        if b and b.get("stand_in"):
            if b["stand_in"] not in stand_ins:
                stand_ins.append(b["stand_in"])
            shown_metric += f" {STAND_IN_MARK}"
        cells, marks, deciding = [], [], []
        for model in models:
            entries = [e for e, c in column.items() if c == model]
            mine = here[here["model"].isin(entries)]
            cells.append(_cell(mine, metric, listen, proto, ds, twins, min_items))
            diffs = listen[(listen["protocol"] == proto) & (listen["dataset"] == ds) & listen["model"].isin(entries)]
            diffs = diffs.dropna(subset=["value"]) if len(diffs) else diffs
            marks.append(_mark(diffs, min_items) if len(diffs) else "")
            deciding.append(diffs.sort_values("ci_low", ascending=False, na_position="last").iloc[0]
                            if len(diffs) else None)
        cells += [pub.get((ds, p, metric), "—") for p in published]
        rows.append(Row(GROUPS.get(kind_of[(proto, ds)], OTHER), ds if ds == proto else f"{ds} ({proto})",
                        _task(b, kind_of[(proto, ds)]), shown_metric, cells, (proto, ds), marks, deciding))
    return Card(models, published, rows, sources, stand_ins)


def _cell(mine: pd.DataFrame, metric: str, listen: pd.DataFrame, proto: str, ds: str, twins: dict,
          min_items: int) -> str:
    """One model's cell on one row (module docstring)."""
    v = mine[mine["metric"] == metric]
    errored = int(mine.loc[mine["metric"] == ERRORED, "value"].sum()) if (mine["metric"] == ERRORED).any() else 0
    if v.empty or int(v["n"].fillna(0).max() or 0) == 0:
        return f"—, all {errored} errored" if errored else "—"
    r = v.iloc[0]
    text = _fmt(r.value) + ("" if pd.isna(r.ci_low) else f" [{_fmt(r.ci_low)}, {_fmt(r.ci_high)}]")
    text += " " + _mark(listen[(listen["protocol"] == proto) & (listen["dataset"] == ds)
                               & listen["model"].isin(set(mine["model"]))], min_items)
    if metric == readings.METRIC:
        text += readings.note(twins.get((proto, ds, r.model, r.variant, "correct")))
    return text


def cells(summary: pd.DataFrame, published: Iterable[dict[str, str]] = (), min_items: int = MIN_ITEMS,
          exclude: Iterable[str] = (), benchmarks: Iterable[dict[str, Any]] = ()) -> tuple[list[str], list[list[str]]]:
    """(model columns, rows): each row ``[benchmark, task, metric, cell per model…, cell per published model…]``."""
    c = build(summary, {"values": list(published)}, min_items, exclude, benchmarks)
    return c.models, [[r.benchmark, r.task, r.metric, *r.cells] for r in c.rows]


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def section(summary: pd.DataFrame, card: dict[str, Any] | None, min_items: int = MIN_ITEMS,
            exclude: Iterable[str] = (), benchmarks: Iterable[dict[str, Any]] = ()) -> list[str]:
    """The report's "Model card" section (Markdown lines); none without ``card`` (the run's ``model_card``)."""
    if card is None:
        return []
    benchmarks = list(benchmarks)
    c = build(summary, card, min_items, exclude, benchmarks)
    if not c.rows:
        return []
    width = len(c.header)
    out = ["", "## Model card", "",
           "One row per benchmark or task, with the metric its benchmark publishes; one column per model, then the "
           "published values. A cell: value [95 % CI] with the correct audio, then whether the model listened on "
           f"that row (✓ a control's paired difference has its CI above 0; ✗ none has, over at least {min_items} "
           "paired items; ? too few items); where the judge follows a benchmark's published rule, evalcore's strict "
           "reading of it and the items the two judge differently (the value first is the rule's own; the mark reads "
           "the strict one). \"—, all N errored\": no request scored on that row (see the errors). WER is "
           "lower-is-better; every other metric here is higher-is-better.", "",
           "| " + " | ".join(c.header) + " |", "|" + "---|" * width]
    group = None
    for r in c.rows:
        if r.group != group:
            group = r.group
            out.append(f"| **{group}** |" + " |" * (width - 1))
        out.append("| " + " | ".join(_escape(x) for x in (r.benchmark, r.task, r.metric, *r.cells)) + " |")
    if c.published:
        out += ["", "Published values (columns marked published; the published models' own figures, whatever models "
                    "this run evaluates): " + "; ".join(f"[{k}] {s}" for k, s in enumerate(c.sources, 1)) + "."]
    if c.stand_ins:
        out += ["", f"{STAND_IN_MARK} Scored with a stand-in, not the published scorer's model: "
                    + "; ".join(c.stand_ins) + " — configure one (docs/cmi-bench.md, docs/mmau-pro.md)."]
    dead = [b for b in benchmarks if b.get("requests_in") and b.get("requests_errored") == b["requests_in"]]
    for b in dead:
        out += ["", f"⚠ **No score on {b['protocol']} · {b['dataset']}**: every one of its {b['requests_in']} "
                    f"requests errored ({', '.join(f'{r} ×{n}' for r, n in b.get('top_reasons') or [])}); see Errors "
                    "below."]
    return out
