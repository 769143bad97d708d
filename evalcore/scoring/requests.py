"""Judged rows to scored requests: chunks merged per request, each protocol's scorer run over its requests
(failures to score become error rows), and the request counts that reconcile in = scored + errored. The one
place both ``evalcore run`` (:mod:`evalcore.pipeline.reduce`) and ``evalcore score``
(:mod:`evalcore.cli.score.stage`) compute per-item scores."""

from __future__ import annotations

import importlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import pandas as pd

from evalcore.core.errors import OUTPUT, bounded, class_of
from evalcore.core.guard import Reason, not_utf8, one_by_one
from evalcore.kinds.base import KINDS
from evalcore.kinds.scorer import Scorer
from evalcore.core.schema import ERRORS, SCORE_KEY, protocol_kind
from evalcore.kinds.scorer import Scorer
from evalcore.scorers.factual import FactualScorer
from evalcore.scorers.factual_formats import BinaryChoiceScorer, TrueFalseScorer
from evalcore.scorers.freeform import FreeformScorer
from evalcore.scorers.mir import MirScorer
from evalcore.scoring.mcq_rules import MCQScorer


def merge_chunks(rows: Iterable[dict]) -> list[dict]:
    """One row per request from its chunk rows.

    A request errors if any of its chunks errored (the first error is kept). Texts are joined
    in chunk order by a newline (each chunk's text kept in ``chunk_texts``, for free-form metrics configured
    with ``chunks: mean``); factual labels are united across chunks (in order of first appearance);
    for multiple choice the first chunk's parsed answer counts.
    """
    by_req: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_req[r["request_id"]].append(r)
    merged = []
    for parts in by_req.values():
        parts.sort(key=lambda r: r.get("chunk_index") or 0)
        row = dict(parts[0])
        bad = next((p for p in parts if p.get("error") is not None), None)
        if bad is not None:
            row["error"], row["error_stage"] = bad["error"], bad["error_stage"]
            row["error_class"] = class_of(bad["error_stage"], bad.get("error_class"))
        # per-chunk judgments, in chunk order, for scorers that aggregate chunks their own way (true/false)
        row["chunk_extracted"] = [p.get("extracted") for p in parts]
        row["chunk_parsed"] = [p.get("parsed_index") for p in parts]
        row["chunk_texts"] = [p.get("text") for p in parts]  # free-form ``chunks: mean`` scores each
        if len(parts) > 1:
            row["text"] = "\n".join(p.get("text") or "" for p in parts)
            labels: list[str] = []
            for p in parts:
                labels += [x for x in (p.get("extracted") or []) if x not in labels]
            row["extracted"] = labels if any(p.get("extracted") is not None for p in parts) else None
            if any(p.get("dropped") is not None for p in parts):
                row["dropped"] = sum(int(p.get("dropped") or 0) for p in parts)
        merged.append(row)
    return merged


def error_rows(rows: Iterable[dict]) -> list[dict]:
    return [{"table": "requests", **{k: r.get(k) for k in ERRORS.names if k != "table"},
             "error_class": class_of(r.get("error_stage"), r.get("error_class"))}
            for r in rows if r.get("error") is not None]


#: the judged request's columns the per-item table keeps beside :data:`SCORE_KEY` and the scorer's metrics
PER_ITEM_FIELDS = ("text", "reference", "labels", "extracted", "dropped", "options", "correct_index", "parsed_index",
                   "judge", "metadata")

ScorerParams = Mapping[str, Mapping[str, Any]]  # protocol instance → keyword arguments of its scorer

def scorer_class(kind: str) -> type[Scorer]:
    """The scorer class of protocol kind ``kind``: its kind names it by import path (:attr:`ProtocolKind.scorer`)."""
    module, _, name = KINDS.get(kind).scorer.partition(":")
    # dynamic: the scorer a registered kind names (in evalcore.scorers, or in the kind's own module)
    return getattr(importlib.import_module(module), name)


def build_scorer(kind: str, params: ScorerParams | None = None, protocol: str | None = None) -> Scorer:
    """The scorer of protocol kind ``kind`` with the parameters configured for instance ``protocol`` (default:
    the instance named after the kind), e.g. free-form metrics."""
    return scorer_class(kind)(**dict((params or {}).get(protocol or kind, {})))


@dataclass
class Scored:
    """The per-item table, the request rows (scoring failures turned into error rows) and, per protocol,
    its scorer's provenance."""

    per_item: pd.DataFrame
    rows: list[dict]
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)


def score_requests(merged: list[dict], params: ScorerParams | None = None,
                   scorers: dict[str, Scorer] | None = None) -> Scored:
    """Score every protocol's requests (each protocol's rows in one call to its scorer).

    A scorer may return an ``error`` per row (e.g. a free-form answer over the metrics' length limit), with its
    ``error_class`` where it knows it: that request leaves the per-item table and becomes an error row with
    ``error_stage = "score"`` (class ``output`` unless the scorer said otherwise), so requests in = scored +
    errored still holds. Each scorer is called through the scoring guard (:func:`evalcore.core.guard.one_by_one`).
    ``scorers``: protocol instance → its scorer, built here
    when missing (a caller scoring groups of rows passes the same dict to build each scorer once)."""
    scorers = {} if scorers is None else scorers
    frames = []
    failed: dict[int, tuple[str, str | None]] = {}
    provenance: dict[str, dict[str, Any]] = {}
    for proto, rows in _by(merged, "protocol").items():
        scored = []
        for r in rows:
            if r.get("error") is None and (why := not_utf8(r.get("text"))) is not None:
                failed[id(r)] = (why, OUTPUT)
            elif r.get("error") is None:
                scored.append(r)
        if not scored:
            continue
        kind = protocol_kind(scored[0])
        for r in scored:
            r["protocol_kind"] = kind
        if proto not in scorers:
            scorers[proto] = build_scorer(kind, params, proto)
        scorer = scorers[proto]
        # the scoring guard: a scorer that raises on the protocol's rows scores each row alone, and a row it still
        # raises on is that row's error (class output), never the run's (evalcore/core/guard.py)
        metrics = one_by_one(f"{kind} scorer", scorer.score, scored)
        if scorer.provenance():
            provenance[proto] = scorer.provenance()
        keep = []
        for r, m in zip(scored, metrics):
            if isinstance(m, Reason):
                m = {"error": str(m), "error_class": m.error_class}
            err = m.pop("error", None)
            given = m.pop("error_class", None)
            if err is None:
                keep.append((r, m))
            else:
                failed[id(r)] = (str(err), given)
        if not keep:
            continue
        df = pd.DataFrame([{**{k: r.get(k) for k in SCORE_KEY},
                            **{k: r.get(k) for k in PER_ITEM_FIELDS}}
                           for r, _ in keep])
        frames.append(pd.concat([df, pd.DataFrame([m for _, m in keep])], axis=1))
    out = [{**r, "error": bounded(failed[id(r)][0]), "error_stage": "score",
            "error_class": class_of("score", failed[id(r)][1])} if id(r) in failed else r for r in merged]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=SCORE_KEY)
    return Scored(table, out, provenance)


def per_item_table(merged: list[dict], params: ScorerParams | None = None) -> pd.DataFrame:
    """One row per scored request: key columns, the judged answer and a column per metric."""
    return score_requests(merged, params).per_item


def _by(rows: list[dict], key: str) -> dict[Any, list[dict]]:
    out: dict[Any, list[dict]] = defaultdict(list)
    for r in rows:
        out[r.get(key)].append(r)
    return out


def counts(n_items_in: int, n_items_err: int, merged: list[dict]) -> dict[str, Any]:
    """Reconciliation figures: in = scored + errored, for items and for requests (``merged``: request rows)."""
    by_model: dict[str, int] = defaultdict(int)
    for r in merged:
        by_model[str(r.get("model"))] += 1
    return request_counts(n_items_in, n_items_err, len(merged), [r for r in merged if r.get("error") is not None],
                          by_model)


def request_counts(n_items_in: int, n_items_err: int, requests_in: int, errors: list[dict],
                   by_model: Mapping[str, int] | None = None) -> dict[str, Any]:
    """:func:`counts` from the number of requests and their error rows alone; with ``by_model`` (model → requests
    in), ``models``: per model, requests in, errored and the errored share."""
    stages: dict[str, int] = defaultdict(int)
    for r in errors:
        stages[r.get("error_stage") or "?"] += 1
    out = {
        "items_in": n_items_in, "items_valid": n_items_in - n_items_err, "items_errored": n_items_err,
        "requests_in": requests_in, "requests_scored": requests_in - len(errors), "requests_errored": len(errors),
        "errors_by_stage": dict(sorted(stages.items())),
    }
    if by_model is not None:
        errored: dict[str, int] = defaultdict(int)
        for r in errors:
            errored[str(r.get("model"))] += 1
        out["models"] = {m: {"requests_in": n, "requests_errored": errored[m],
                             "error_share": round(errored[m] / n, 6) if n else 0.0}
                         for m, n in sorted(by_model.items())}
    return out
