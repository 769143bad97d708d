"""The ``evalcore score`` commands' way into the scoring stage: one job of judged chunk rows in, scored requests out.

A command turns its input rows into the judged rows a run's judge stage writes (``request_id``,
``chunk_index``, the judge's ``extracted``/``parsed_index``, the request's ``labels``/``options``/
``correct_index``) and hands them to :func:`score_job` as one :class:`Job` with their protocol kind and the
scorers' params, as a run's protocol config gives them; the job is scored exactly as ``evalcore run`` scores it:
:func:`evalcore.scoring.requests.merge_chunks`, then :func:`evalcore.scoring.requests.score_requests` with the
protocol's registered scorer. Scores are computed in that one place only. The rest of what the commands take
from the stage (a kind's scorer for its aggregates, a run's summary table, the error rows' table) is here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa

from evalcore.core.schema import ERRORS, SCORE_KEY, conform
from evalcore.kinds.scorer import Scorer
from evalcore.scoring.requests import (PER_ITEM_FIELDS, Scored, ScorerParams, build_scorer, error_rows, merge_chunks,
                                       score_requests)
from evalcore.scoring.summary import summary_table


@dataclass(frozen=True)
class Job:
    """What a command hands the scoring stage: its judged chunk rows, the protocol kind they are (a row may name
    its own ``protocol`` and ``protocol_kind``, e.g. CMI-Bench's two instances) and the scorers' params per
    protocol instance."""

    rows: list[dict[str, Any]]
    kind: str | None = None
    params: ScorerParams | None = None


def score_job(job: Job) -> Scored:
    """The job's requests scored by the stage (chunks merged per request, each protocol's registered scorer)."""
    rows = [{"protocol": job.kind, "protocol_kind": job.kind, "error": None, **r} for r in job.rows]
    return score_requests(merge_chunks(rows), job.params)


@dataclass
class Judged:
    """Per request: the scorer's metric columns (scored requests) or the scorer's error (requests it refused)."""

    metrics: dict[str, dict[str, Any]]
    errors: dict[str, str]
    provenance: dict[str, Any]  # the scorer's (profile, versions, definitions, models)


def score_judged(judged: list[dict[str, Any]], kind: str, params: dict[str, Any] | None = None) -> Judged:
    """Score judged chunk rows of protocol kind ``kind`` through the pipeline's stage, its scorer built with
    ``params`` (as a run's protocol config gives them, e.g. free-form metrics).

    Rows are chunks of requests (``request_id``; ``chunk_index`` orders them, 0 when absent); the rows
    passed are the valid ones (a command's bad input rows are its error rows and never reach the stage)."""
    scored = score_job(Job(judged, kind, {kind: params} if params is not None else None))
    side = set(SCORE_KEY) | set(PER_ITEM_FIELDS)
    metric_columns = [c for c in scored.per_item.columns if c not in side]
    metrics = {str(r["request_id"]): {c: r[c] for c in metric_columns}
               for r in scored.per_item.to_dict("records")}
    errors = {str(r["request_id"]): str(r["error"]) for r in scored.rows if r.get("error") is not None}
    return Judged(metrics, errors, scored.provenance.get(kind, {}))


def scorer(kind: str) -> Scorer:
    """The registered scorer of protocol kind ``kind`` (for its aggregates, bootstrap units and breakdowns)."""
    return build_scorer(kind)


def job_summary(job: Job, scored: Scored, errors: list[dict], *, resamples: int, seed: int) -> pd.DataFrame:
    """A run's long-form summary table of a scored job (95 % CIs), with ``errors`` as its errored requests."""
    return summary_table(scored.per_item, resamples, 0.95, seed, job.params, errors=errors).to_pandas()


def error_table(errors: list[dict]) -> pa.Table:
    """A run's ``errors.parquet`` table of errored request rows."""
    return conform(error_rows(errors), ERRORS)
