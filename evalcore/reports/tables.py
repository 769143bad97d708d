"""Reduce judged responses (one row per chunk) to ``per_item`` and long-form ``summary`` tables."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import pandas as pd
import pyarrow as pa

from evalcore.errors import bounded, class_of
from evalcore.metrics import SCORERS, Aggregate, Scorer
from evalcore.metrics.base import mean_item_stats
from evalcore.metrics.bootstrap import estimate, paired_difference
from evalcore.protocols.seeding import derive_seed
from evalcore.reports.denominators import denominator_rows
from evalcore.schema import ERRORS, SCORE_KEY, SUMMARY, protocol_kind


def merge_chunks(rows: Iterable[dict]) -> list[dict]:
    """One row per request from its chunk rows.

    A request errors if any of its chunks errored (the first error is kept). Texts are joined
    in chunk order; factual labels are united across chunks (in order of first appearance);
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


ScorerParams = Mapping[str, Mapping[str, Any]]  # protocol instance → keyword arguments of its scorer


def build_scorer(kind: str, params: ScorerParams | None = None, protocol: str | None = None) -> Scorer:
    """The scorer of protocol kind ``kind`` with the parameters configured for instance ``protocol`` (default:
    the instance named after the kind), e.g. free-form metrics."""
    return SCORERS.build(kind, **dict((params or {}).get(protocol or kind, {})))


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

    A scorer may return an ``error`` per row (e.g. a free-form answer over the metrics' length limit):
    that request leaves the per-item table and becomes an error row with ``error_stage = "score"``,
    so requests in = scored + errored still holds. ``scorers``: protocol instance → its scorer, built here
    when missing (a caller scoring groups of rows passes the same dict to build each scorer once)."""
    scorers = {} if scorers is None else scorers
    frames = []
    failed: dict[int, str] = {}
    provenance: dict[str, dict[str, Any]] = {}
    for proto, rows in _by(merged, "protocol").items():
        scored = [r for r in rows if r.get("error") is None]
        if not scored:
            continue
        kind = protocol_kind(scored[0])
        for r in scored:
            r["protocol_kind"] = kind
        if proto not in scorers:
            scorers[proto] = build_scorer(kind, params, proto)
        scorer = scorers[proto]
        metrics = scorer.score(scored)
        if scorer.provenance():
            provenance[proto] = scorer.provenance()
        keep = []
        for r, m in zip(scored, metrics):
            err = m.pop("error", None)
            if err is None:
                keep.append((r, m))
            else:
                failed[id(r)] = str(err)
        if not keep:
            continue
        df = pd.DataFrame([{**{k: r.get(k) for k in SCORE_KEY},
                            **{k: r.get(k) for k in ("text", "reference", "labels", "extracted", "dropped",
                                                     "options", "correct_index", "parsed_index", "judge",
                                                     "metadata")}}
                           for r, _ in keep])
        frames.append(pd.concat([df, pd.DataFrame([m for _, m in keep])], axis=1))
    out = [{**r, "error": bounded(failed[id(r)]), "error_stage": "score", "error_class": class_of("score")}
           if id(r) in failed else r for r in merged]
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


ItemStats = Callable[[pd.DataFrame, list[str], str], pd.DataFrame]


def _keyed(key: tuple, names: list[str]) -> dict[str, Any]:
    return dict(zip(names, key if isinstance(key, tuple) else (key,)))


def _columns(aggregates: Iterable[Aggregate]) -> list[str]:
    """Every column the aggregates read, once each (per-unit statistics are computed once for all of them)."""
    return list(dict.fromkeys(c for agg in aggregates for c in agg.columns))


def aggregate(df: pd.DataFrame, aggregates: Iterable[Aggregate], by: list[str], *, unit: str = "item_id",
              resamples: int, confidence: float, seed: int, item_stats: ItemStats = mean_item_stats) -> list[dict]:
    """Long-form rows: each aggregate of each group of ``by``, with a bootstrap CI over units
    (per-unit statistics from ``item_stats``)."""
    aggregates = list(aggregates)
    out = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        stats = item_stats(g, _columns(aggregates), unit)
        for agg in aggregates:
            e = estimate(stats[list(agg.columns)].to_numpy(), agg.fn, resamples=resamples,
                         confidence=confidence, seed=derive_seed("bootstrap", seed, *_flat(key), agg.name))
            out.append({**_keyed(key, by), "kind": "value", "metric": agg.name, **_estimate(e),
                        "definition": agg.definition})
    return out


def contrasts(df: pd.DataFrame, aggregates: Iterable[Aggregate], by: list[str], *, column: str = "condition",
              reference: str = "correct", unit: str = "item_id", resamples: int, confidence: float,
              seed: int, item_stats: ItemStats = mean_item_stats) -> list[dict]:
    """Paired differences reference − other value of ``column`` within each group of ``by``, over shared units."""
    aggregates = list(aggregates)
    out = []
    for key, g in df.groupby(by, sort=True, dropna=False):
        sides = dict(iter(g.groupby(column, sort=True)))
        if reference not in sides:
            continue
        stats = {side: item_stats(sdf, _columns(aggregates), unit) for side, sdf in sides.items()}
        for agg in aggregates:
            cols = list(agg.columns)
            ref = stats[reference][cols]
            for other in sides:
                if other == reference:
                    continue
                st = stats[other][cols]
                common = ref.index.intersection(st.index)
                e = paired_difference(ref.loc[common].to_numpy(), st.loc[common].to_numpy(), agg.fn,
                                      resamples=resamples, confidence=confidence,
                                      seed=derive_seed("bootstrap-diff", seed, *_flat(key), agg.name, other))
                out.append({**_keyed(key, by), column: f"{reference}-{other}", "kind": "paired_diff",
                            "metric": agg.name, **_estimate(e),
                            "definition": f"paired difference {reference} − {other} over items scored in both; "
                                          + agg.definition})
    return out


def _flat(key: Any) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _estimate(e: Any) -> dict[str, Any]:
    return {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n}


def summary_table(per_item: pd.DataFrame, resamples: int, confidence: float, seed: int,
                  params: ScorerParams | None = None, errors: list[dict] | None = None) -> pa.Table:
    """Long-form summary: every aggregate per group, plus paired differences correct − other condition,
    overall (``group = all``) and per task when a protocol has several; scorers get ``params``.

    ``errors`` (the run's errored request rows) make the denominators explicit: ``errored`` per cell and the
    scorers' ``*_with_errors`` metrics (:mod:`evalcore.reports.denominators`)."""
    errored = _by([r for r in errors or [] if r.get("protocol") is not None], "protocol")
    protocols = sorted(set(per_item["protocol"].dropna()) if "protocol" in per_item.columns else set()) + sorted(
        set(errored) - (set(per_item["protocol"].dropna()) if "protocol" in per_item.columns else set()))
    stats = {"resamples": resamples, "confidence": confidence, "seed": seed}
    out: list[dict] = []
    for proto in protocols:
        pdf = per_item[per_item["protocol"] == proto] if "protocol" in per_item.columns else per_item
        kind = protocol_kind(pdf.iloc[0].to_dict() if len(pdf) else errored[proto][0])
        scorer = build_scorer(kind, params, proto)
        first = len(out)
        if len(pdf):
            out += _scored_rows(pdf, scorer, stats)
        else:
            pdf = pd.DataFrame(columns=[*SCORE_KEY, *scorer.columns])
        out += denominator_rows(pdf, errored.get(proto, []), scorer, **stats)
        for row in out[first:]:
            row["protocol_kind"] = kind
    return pa.Table.from_pylist(out, schema=SUMMARY)


def _scored_rows(pdf: pd.DataFrame, scorer: Scorer, stats: dict[str, Any]) -> list[dict]:
    """One protocol instance's aggregates, paired differences, spreads and extra rows over its scored rows."""
    out: list[dict] = []
    tasks = sorted(pdf["task"].dropna().unique())
    groups = [("all", pdf)] + ([(f"task={t}", pdf[pdf["task"] == t]) for t in tasks] if len(tasks) > 1 else [])
    groups += scorer.breakdown_groups(pdf) if hasattr(scorer, "breakdown_groups") else []  # e.g. mcq: genre=…
    for group, gdf in groups:
        gdf = gdf.assign(group=group)
        by = ["protocol", "dataset", "model", "variant", "group"]
        out += aggregate(gdf, scorer.aggregates, by + ["condition"], item_stats=scorer.item_stats, **stats)
        out += contrasts(gdf, scorer.aggregates, by, item_stats=scorer.item_stats, **stats)
        for key, sdf in gdf.groupby(by + ["condition"], sort=True, dropna=False):
            out += [{**_keyed(key, by + ["condition"]), "kind": "value", **r} for r in scorer.spread_rows(sdf)]
    if hasattr(scorer, "extra_rows"):  # e.g. mcq: which option type the answers chose
        out += scorer.extra_rows(pdf, **stats)
    return out


def counts(n_items_in: int, n_items_err: int, merged: list[dict]) -> dict[str, Any]:
    """Reconciliation figures: in = scored + errored, for items and for requests (``merged``: request rows)."""
    return request_counts(n_items_in, n_items_err, len(merged), [r for r in merged if r.get("error") is not None])


def request_counts(n_items_in: int, n_items_err: int, requests_in: int, errors: list[dict]) -> dict[str, Any]:
    """:func:`counts` from the number of requests and their error rows alone."""
    stages: dict[str, int] = defaultdict(int)
    for r in errors:
        stages[r.get("error_stage") or "?"] += 1
    return {
        "items_in": n_items_in, "items_valid": n_items_in - n_items_err, "items_errored": n_items_err,
        "requests_in": requests_in, "requests_scored": requests_in - len(errors), "requests_errored": len(errors),
        "errors_by_stage": dict(sorted(stages.items())),
    }
