"""Agreement of a protocol's judge with a second judge on the same responses (pipeline runs).

A protocol that configures ``agreement_judge`` (e.g. ``judge: llm_extractor`` and
``agreement_judge: lexicon``) gets, after the run, the second judge applied to the same chunk
texts on the driver; its labels are united over a request's chunks like the first judge's
(:func:`evalcore.scoring.requests.merge_chunks`). Per request (``tables/agreement.parquet``): both
label lists, exact set match, Jaccard and TP/FP/FN of the judge against the agreement judge
(:func:`evalcore.scorers.factual_agreement.compare`). Summary rows (``agreement_exact``,
``agreement_jaccard``, ``agreement_f1``, with bootstrap CIs over items, or over clips where items share one) join the run's summary in
the groups of the other metrics. A judge that picks an option (``parsed_index``) counts the chosen
option as its label set. Requests whose second judgment failed are left out (and counted in
``agreement_errors``).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pandas as pd

from evalcore.runconfig.config import JudgeConfig, RunConfig
from evalcore.core.guard import judged as guarded_judge
from evalcore.judges.base import build_judge
from evalcore.scorers import factual_agreement
from evalcore.stats.aggregate import aggregate

__all__ = ["second_labels", "agreement"]

KEY = ["request_id", "protocol", "dataset", "item_id", "task", "model", "condition", "variant", "clip_id"]
COLUMNS = [*KEY, "judge_labels", "agreement_labels", "exact", "jaccard", "tp", "fp", "fn"]


def _labels(result: dict, options: list[str] | None) -> list[str] | None:
    if result.get("error"):
        return None
    if result.get("extracted") is not None:
        return list(result["extracted"])
    idx = result.get("parsed_index")
    if idx is None:
        return None
    return [options[idx]] if options and 0 <= idx < len(options) else []


def second_labels(judge_cfg: JudgeConfig, chunks: list[dict]) -> dict[str, list[str] | None]:
    """request_id → the second judge's labels united over its chunks (None if a chunk's judgment failed)."""
    todo = [r for r in chunks if r.get("text") is not None]
    if not todo:
        return {}
    judge = build_judge(judge_cfg.kind, **judge_cfg.params)
    tasks = [r.get("task") for r in todo] if judge.uses_tasks else None
    # a second judge reads no questions (it measures agreement of labels); through the scoring guard: a failing
    # second judge leaves the run's own results intact, and an answer it raises on is that answer's alone
    results = guarded_judge(f"agreement judge {judge_cfg.kind}", lambda ix: judge.judge(
        [todo[i]["text"] for i in ix], [todo[i].get("options") for i in ix],
        tasks=[tasks[i] for i in ix] if tasks is not None else None), list(range(len(todo))))
    parts: dict[str, list[tuple[int, list[str] | None]]] = defaultdict(list)
    for r, res in zip(todo, results):
        parts[r["request_id"]].append((r.get("chunk_index") or 0, _labels(res, r.get("options"))))
    out: dict[str, list[str] | None] = {}
    for rid, ps in parts.items():
        ps.sort(key=lambda p: p[0])
        if any(labels is None for _, labels in ps):
            out[rid] = None
            continue
        out[rid] = list(dict.fromkeys(lab for _, labels in ps for lab in labels or []))
    return out


def agreement(cfg: RunConfig, judged: list[dict], merged: list[dict]) -> tuple[pd.DataFrame, list[dict], int]:
    """(per-request agreement table, summary rows, requests left out) for every protocol with an
    ``agreement_judge``; empty when none has one."""
    rows: list[dict[str, Any]] = []
    left_out = 0
    for proto in cfg.protocols:
        second_cfg = getattr(proto, "agreement_judge", None)
        if second_cfg is None:
            continue
        scored = [r for r in merged if r["protocol"] == proto.name and r.get("error") is None]
        if not scored:
            continue
        ok_ids = {r["request_id"] for r in scored}
        chunks = [r for r in judged if r.get("request_id") in ok_ids]
        second = second_labels(second_cfg, chunks)
        for r in scored:
            first = _labels({"extracted": r.get("extracted"), "parsed_index": r.get("parsed_index")}, r.get("options"))
            other = second.get(r["request_id"])
            if first is None or other is None:
                left_out += 1
                continue
            rows.append({**{k: r.get(k) for k in KEY}, "judge_labels": first, "agreement_labels": other,
                         **factual_agreement.compare(first, other)})
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table, summary_rows(cfg, table), left_out


def summary_rows(cfg: RunConfig, table: pd.DataFrame) -> list[dict]:
    """Long-form summary rows of the agreement aggregates: overall and per task (when several)."""
    out: list[dict] = []
    stats = {"resamples": cfg.stats.bootstrap_resamples, "confidence": cfg.stats.confidence,
             "seed": cfg.seeds.bootstrap}
    by = ["protocol", "dataset", "model", "variant", "group", "condition"]
    for _, pdf in table.groupby("protocol", sort=True):
        tasks = sorted(pdf["task"].dropna().unique())
        groups = [("all", pdf)] + ([(f"task={t}", pdf[pdf["task"] == t]) for t in tasks] if len(tasks) > 1 else [])
        for group, gdf in groups:
            rows = aggregate(gdf.assign(group=group), factual_agreement.AGGREGATES, by, **stats)
            out += [{**r, "definition": r["definition"] + f" (agreement judge: {_name(cfg, r['protocol'])})"}
                    for r in rows]
    return out


def _name(cfg: RunConfig, protocol: str) -> str:
    p = next(p for p in cfg.protocols if p.name == protocol)
    j = p.agreement_judge
    return f"{j.kind} {json.dumps(j.params, sort_keys=True)}" if j.params else j.kind
