"""What each benchmark of a finished run is — a protocol instance on one dataset, a row of the model card — for the
report and the error budget: its kind, its tasks and rules, the figures its scorer reports, its requests in and
errored (with their top reasons), and the stand-in it was scored with, if any.

Read from the run's reduced rows and its config, nothing rescored. The figures are what the benchmark's scorer
reports whatever happened to its requests: a benchmark whose every request errored still has its own metric (the
card shows it as "—, all N errored", never another metric over no item), and a run ends with exit 4 naming it
(:func:`evalcore.pipeline.outcome.check_error_budget`). Written to run.json as ``benchmarks``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import pandas as pd

from evalcore.runconfig.config import ProtocolConfig, RunConfig
from evalcore.datasets.cmi_bench import Family
from evalcore.judges.base import JUDGES
from evalcore.mir_rules import tagging
from evalcore.mir_rules.rules import RULES
from evalcore.pipeline.outcome import error_reason
from evalcore.scoring.requests import build_scorer

__all__ = ["benchmarks", "figures_of", "stand_in_of"]

#: the top reasons of a benchmark's errors kept in run.json
TOP_REASONS = 3


def figures_of(proto: ProtocolConfig, categories: Iterable[str]) -> list[str]:
    """The figures the benchmark's scorer reports, its primary first: a mir benchmark's rules' (the tagging rule's
    AUCs), a free-form protocol's configured metrics, another kind's scorer's aggregates."""
    if proto.kind_spec.released_rules:
        out: list[str] = []
        for c in categories:
            if c in RULES:
                out += [a.name for a in RULES.build(c).aggregates]
                out += list(tagging.FIGURES) if c == Family.TAGGING else []
        return list(dict.fromkeys(out))
    if proto.kind_spec.text_metrics:
        return list(proto.freeform_metrics().names)
    return [a.name for a in build_scorer(proto.kind).aggregates]


def stand_in_of(proto: ProtocolConfig, categories: Iterable[str]) -> str | None:
    """What stood in for the published scorer's model on this benchmark (a judge's or the tagging rule's
    bag-of-words in place of NV-Embed-v2 or GTE), else None: the card says so on its row."""
    if proto.kind_spec.released_rules:
        return tagging.STAND_IN if proto.similarity is None and Family.TAGGING in set(categories) else None
    judge = proto.judge
    hook = getattr(JUDGES.get(judge.kind), "stand_in", None) if judge is not None else None
    return hook(judge.params) if callable(hook) else None


def _values(frame: pd.DataFrame, rows: list[dict], column: str, key: tuple[str, str]) -> list[str]:
    found: set[str] = set()
    if column in frame.columns and len(frame):
        mine = frame[(frame["protocol"].astype(str) == key[0]) & (frame["dataset"].astype(str) == key[1])]
        found |= {str(v) for v in mine[column].dropna().unique()}
    found |= {str(r[column]) for r in rows if r.get(column) is not None}
    return sorted(found)


def benchmarks(cfg: RunConfig, per_item: pd.DataFrame, errors: list[dict],
               requests_in: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    """One record per benchmark of the run (protocol instance × dataset with requests), in config order."""
    protocols = {p.name: p for p in cfg.protocols}
    by_key: dict[tuple[str, str], list[dict]] = {}
    for r in errors:
        by_key.setdefault((str(r.get("protocol")), str(r.get("dataset"))), []).append(r)
    order = {p.name: i for i, p in enumerate(cfg.protocols)}
    out = []
    for key in sorted(requests_in, key=lambda k: (order.get(k[0], len(order)), k[1])):
        proto = protocols.get(key[0])
        if proto is None:
            continue
        mine = by_key.get(key, [])
        categories = _values(per_item, mine, "category", key)
        reasons = Counter(error_reason(r) for r in mine).most_common(TOP_REASONS)
        out.append({"protocol": key[0], "dataset": key[1], "kind": proto.kind,
                    "tasks": _values(per_item, mine, "task", key), "categories": categories,
                    "figures": figures_of(proto, categories), "stand_in": stand_in_of(proto, categories),
                    "requests_in": int(requests_in[key]), "requests_errored": len(mine),
                    "top_reasons": [[r, n] for r, n in reasons]})
    return out
