"""The ``evalcore score`` commands' way into the scoring stage: judged chunk rows in, per-request metrics out.

A command turns its input rows into the judged rows a run's judge stage writes (``request_id``,
``chunk_index``, the judge's ``extracted``/``parsed_index``, the request's ``labels``/``options``/
``correct_index``), then :func:`score_judged` scores them exactly as ``evalcore run`` does:
:func:`evalcore.scoring.requests.merge_chunks`, then :func:`evalcore.scoring.requests.score_requests`
with the protocol's registered scorer. Scores are computed in that one place only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalcore.scoring.requests import PER_ITEM_FIELDS, merge_chunks, score_requests
from evalcore.core.schema import SCORE_KEY


@dataclass
class Judged:
    """Per request: the scorer's metric columns (scored requests) or the scorer's error (requests it refused)."""

    metrics: dict[str, dict[str, Any]]
    errors: dict[str, str]


def score_judged(judged: list[dict[str, Any]], kind: str) -> Judged:
    """Score judged chunk rows of protocol kind ``kind`` through the pipeline's stage.

    Rows are chunks of requests (``request_id``; ``chunk_index`` orders them, 0 when absent); the rows
    passed are the valid ones (a command's bad input rows are its error rows and never reach the stage)."""
    rows = [{"protocol": kind, "protocol_kind": kind, "error": None, **r} for r in judged]
    scored = score_requests(merge_chunks(rows))
    side = set(SCORE_KEY) | set(PER_ITEM_FIELDS)
    metric_columns = [c for c in scored.per_item.columns if c not in side]
    metrics = {str(r["request_id"]): {c: r[c] for c in metric_columns}
               for r in scored.per_item.to_dict("records")}
    errors = {str(r["request_id"]): str(r["error"]) for r in scored.rows if r.get("error") is not None}
    return Judged(metrics, errors)
