"""Stage 6's reduction of committed rows to tables, a group of shards at a time.

The committed rows (one per chunk) are read a group of whole shards at a time
(:func:`evalcore.pipeline.commit.iter_committed`), merged per request and scored by their protocol's
scorer (built once per run, reused by every group); each group's per-item rows go to a Parquet part, and only
their compact columns — keys and metric values, never the response texts — stay in the driver for the
summary's bootstrap. Scoring by groups gives the same values as scoring all rows at once when every scorer
scores a request from that request alone (:attr:`evalcore.kinds.scorer.Scorer.row_local`); a run with a
scorer that needs them all (CIDEr-D's corpus, CLAPText on actors) or a second judge to agree with
(``agreement_judge``) is reduced in one group.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pandas.api.types import is_string_dtype, union_categoricals

from evalcore.core import storage
from evalcore.runconfig.config import RunConfig
from evalcore.core.schema import SCORE_KEY
from evalcore.scorers.freeform import needs_all_rows
from evalcore.scoring.requests import ScorerParams, merge_chunks, request_counts, score_requests

GROUP_ROWS = 5_000  # committed rows per group, about (a group's rows are dicts while it is scored: ~25 MB)
LEFT_OUT = ("request_id", "text", "reference")  # per-item columns the summary never reads
#: per-item key columns with few distinct values, kept as categoricals in the driver (a code a row, not a string)
CATEGORICAL = ("dataset", "protocol", "model", "condition", "variant", "protocol_kind", "task", "category",
               "difficulty")


def group_rows(cfg: RunConfig) -> int | None:
    """Committed rows per group for ``cfg`` (:data:`GROUP_ROWS`), or None: all at once (a free-form metric of
    :func:`~evalcore.scorers.freeform.needs_all_rows`, e.g. CIDEr-D, or an ``agreement_judge``)."""
    for p in cfg.protocols:
        if getattr(p, "agreement_judge", None) is not None:
            return None
        if p.kind_spec.text_metrics and needs_all_rows(p.freeform_metrics().names):
            return None
    return GROUP_ROWS


@dataclass
class Reduced:
    """The per-item table without its texts, the request-level error rows, the request counts and the
    scorers' provenance."""

    per_item: pd.DataFrame
    errors: list[dict] = field(default_factory=list)
    requests_in: int = 0
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)
    labels_dropped: int | None = None
    rows: list[dict] | None = None  # the merged request rows, when asked for (``keep_rows``)
    requests_by_model: dict[str, int] = field(default_factory=dict)  # model → its requests
    #: (protocol instance, dataset) → its requests: a benchmark's share of errors (the error budget, the card)
    requests_by_benchmark: dict[tuple[str, str], int] = field(default_factory=dict)

    def counts(self, items_in: int, items_errored: int) -> dict[str, Any]:
        """Reconciliation figures: in = scored + errored, for items and for requests, and per model."""
        return request_counts(items_in, items_errored, self.requests_in, self.errors, self.requests_by_model)


def reduce_rows(groups: Iterable[list[dict]], params: ScorerParams, per_item_uri: str,
                out: storage.RunStorage, keep_rows: bool = False) -> Reduced:
    """Score every group of committed rows (a request's chunks always in one group) and write the per-item
    table to ``per_item_uri`` (a part per group, joined at the end a part at a time); returns what the
    summary and the counts need (``keep_rows``: and the merged request rows)."""
    scorers: dict[str, Any] = {}
    compact, parts, errors, kept = [], [], [], []
    n_in, dropped = 0, None
    by_model: Counter[str] = Counter()
    by_benchmark: Counter[tuple[str, str]] = Counter()
    provenance: dict[str, dict[str, Any]] = {}
    tmp = tempfile.mkdtemp(prefix="evalcore-per-item-")
    try:
        for rows in groups:
            scored = score_requests(merge_chunks(rows), params, scorers)
            del rows
            n_in += len(scored.rows)
            by_model.update(str(r.get("model")) for r in scored.rows)
            by_benchmark.update((str(r.get("protocol")), str(r.get("dataset"))) for r in scored.rows)
            bad = [r for r in scored.rows if r.get("error") is not None]
            errors += bad
            provenance.update(scored.provenance)
            if keep_rows:
                kept += scored.rows
            part = scored.per_item
            if "dropped" in part.columns and part["dropped"].notna().any():
                dropped = (dropped or 0) + int(part["dropped"].fillna(0).sum())
            path = os.path.join(tmp, f"part-{len(parts):05d}.parquet")
            pq.write_table(pa.Table.from_pandas(part, preserve_index=False), path)
            parts.append(path)
            compact.append(_compact(part[_summary_columns(part, scorers)]))
            del scored, part
        out.upload_file(_joined(parts, os.path.join(tmp, "per_item.parquet")), per_item_uri)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    frames = [f for f in compact if len(f)]
    per_item = (_concat(frames) if len(frames) > 1 else frames[0] if frames
                else (compact[0] if compact else pd.DataFrame(columns=SCORE_KEY)))
    return Reduced(per_item=per_item, errors=errors, requests_in=n_in, provenance=provenance,
                   labels_dropped=dropped, rows=kept if keep_rows else None, requests_by_model=dict(by_model),
                   requests_by_benchmark=dict(by_benchmark))


def _summary_columns(part: pd.DataFrame, scorers: dict[str, Any]) -> list[str]:
    """The per-item columns the summary reads: the keys and every metric column, and what the run's scorers
    ask besides (:attr:`~evalcore.kinds.scorer.Scorer.summary_columns`; all, when one does not say)."""
    wanted: set[str] | None = set()
    for s in scorers.values():
        if s.summary_columns is None:
            wanted = None
            break
        wanted |= set(s.summary_columns) | set(s.columns)
    return [c for c in part.columns if c not in LEFT_OUT and (wanted is None or c in SCORE_KEY or c in wanted)]


def _compact(part: pd.DataFrame) -> pd.DataFrame:
    """``part`` with its :data:`CATEGORICAL` string columns as categoricals (values unchanged)."""
    return part.astype({c: "category" for c in CATEGORICAL if c in part.columns and is_string_dtype(part[c])
                        and not isinstance(part[c].dtype, pd.CategoricalDtype)})


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """``frames`` as one frame, a column at a time, each column's parts released as it is joined: the peak is
    the frames and one joined column, not twice the frames. A column some frames lack is null there; a column
    categorical in every frame stays categorical (categories united and sorted, so groups keep their order)."""
    names = list(dict.fromkeys(c for f in frames for c in f.columns))
    n = [len(f) for f in frames]
    out = {}
    for c in names:
        parts = [f.pop(c) if c in f.columns else pd.Series([None] * k, dtype=object) for f, k in zip(frames, n)]
        if all(isinstance(p.dtype, pd.CategoricalDtype) for p in parts):
            out[c] = pd.Series(union_categoricals(parts, sort_categories=True, ignore_order=True))
        else:
            out[c] = pd.concat([p.astype(object) if isinstance(p.dtype, pd.CategoricalDtype) else p for p in parts],
                               ignore_index=True)
        del parts
    return pd.DataFrame(out)


def _joined(parts: list[str], path: str) -> str:
    """The per-item parts as one Parquet file at ``path`` (one part: that part), a part at a time, columns
    unified (a part may lack a column, or hold only nulls in it); returns its path."""
    if not parts:
        pq.write_table(pa.Table.from_pandas(pd.DataFrame(columns=SCORE_KEY), preserve_index=False), path)
        return path
    if len(parts) == 1:
        return parts[0]
    schema = pa.unify_schemas([pq.read_schema(p).remove_metadata() for p in parts], promote_options="permissive")
    with pq.ParquetWriter(path, schema) as w:
        for p in parts:
            t = pq.read_table(p)
            w.write_table(pa.table({f.name: t.column(f.name).cast(f.type) if f.name in t.column_names
                                    else pa.nulls(t.num_rows, f.type) for f in schema}, schema=schema))
    return path
