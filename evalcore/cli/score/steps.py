"""The steps every ``evalcore score`` command takes around the scoring stage (:mod:`evalcore.cli.score.stage`).

Read the input rows (an unreadable file exits 2 naming why), check ``--group-by``, have a registered judge read
the answers (one batched call through the scoring guard: an answer the judge raises on is that row's error, never
the command's), summarize, then close: the extra tables, the counts line (rows in = scored + errored), what was
written, and the exit code (:attr:`~evalcore.core.errors.ExitCode.UNSCORED` when nothing scored).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from evalcore.core import storage
from evalcore.core.guard import judged as guarded_judge
from evalcore.judges.base import Judge, build_judge
from evalcore.cli.score.io import (SUMMARY_TAIL, InputError, default_group_by, exit_if_unscored, fail, read_rows,
                                   say, summarize)
from evalcore.cli.score.released_mcq import released_rows
from evalcore.stats.aggregate import ItemStats, mean_item_stats


def columns(text: str | None) -> list[str]:
    """The names of a comma-separated option (blank ones left out)."""
    return [c.strip() for c in (text or "").split(",") if c.strip()]


def read_input(command: str, uri: str, required: Iterable[str], *, released: str | None = None,
               limit: int | None = None, caught: tuple[type[Exception], ...] = (InputError, ValueError, OSError)
               ) -> pd.DataFrame:
    """The input rows (:func:`~evalcore.cli.score.io.read_rows`, or a benchmark's ``released`` output file); an
    error in ``caught`` exits 2 with its message (its first ``limit`` characters)."""
    try:
        return released_rows(uri, released) if released else read_rows(uri, required)
    except caught as e:
        fail(command, str(e)[:limit])


def group_columns(command: str, df: pd.DataFrame, group_by: str | None, reserved: set[str]) -> list[str]:
    """``--group-by`` columns (default: every scalar column outside ``reserved`` and ``item_id``); fails naming
    a column that is not an input grouping column."""
    if group_by is None:
        return default_group_by(df, reserved | {"item_id"})
    groups = columns(group_by)
    unknown = [c for c in groups if c not in df.columns or c in reserved]
    if unknown:
        fail(command, f"--group-by: no such grouping column(s) {unknown}; columns: {list(df.columns)}")
    return groups


def judge(name: str, **params: Any) -> Judge:
    """The registered judge ``name`` built with ``params``."""
    return build_judge(name, **params)


def judge_answers(label: str, judge: Judge, responses: Sequence[str], options: Sequence[Any],
                  **per_answer: Sequence[Any] | None) -> list[dict]:
    """``judge``'s result per response in one batched call through the scoring guard (``label`` names the judge
    in a row's error); ``per_answer``: further lists the judge takes (e.g. ``questions``), None to pass None."""
    return guarded_judge(label, lambda ix: judge.judge(
        [responses[k] for k in ix], [options[k] for k in ix],
        **{name: None if v is None else [v[k] for k in ix] for name, v in per_answer.items()}),
        list(range(len(responses))))


@dataclass(frozen=True)
class Counts:
    """Rows in = scored + errored."""

    n_in: int
    scored: int
    errored: int

    @classmethod
    def of(cls, errors: pd.Series) -> Counts:
        """The counts of a per-row ``error`` column (null: scored)."""
        ok = errors.isna()
        return cls(len(errors), int(ok.sum()), int((~ok).sum()))

    @property
    def line(self) -> str:
        return f"rows: {self.n_in} in = {self.scored} scored + {self.errored} errored"


def scored_rows(per_item: pd.DataFrame) -> pd.DataFrame:
    """The rows without an ``error``, numbered in ``_row`` (the bootstrap unit where items are not named)."""
    ok = per_item["error"].isna()
    return per_item[ok].assign(_row=np.arange(int(ok.sum())))


def bootstrap_unit(scored: pd.DataFrame, groups: list[str]) -> str:
    """What the bootstrap resamples: ``item_id`` where the rows name their items and do not group by them, else
    each row (``_row``)."""
    return "item_id" if "item_id" in scored.columns and "item_id" not in groups else "_row"


def summary_of(scored: pd.DataFrame, aggregates: Iterable[Any], groups: list[str], *, unit: str, resamples: int,
               seed: int, item_stats: ItemStats = mean_item_stats) -> pd.DataFrame:
    """:func:`~evalcore.cli.score.io.summarize` of the scored rows; no rows: the summary's columns only."""
    if not len(scored):
        return pd.DataFrame(columns=[*groups, *SUMMARY_TAIL])
    return summarize(scored, aggregates, groups, unit=unit, resamples=resamples, seed=seed, item_stats=item_stats)


def write_tables(out: str, tables: Mapping[str, pd.DataFrame | pa.Table]) -> None:
    """Each table as ``out/<name>`` (Parquet)."""
    for name, table in tables.items():
        arrow = table if isinstance(table, pa.Table) else pa.Table.from_pandas(table, preserve_index=False)
        storage.write_parquet(arrow, storage.join(out, name))


def close(command: str, counts: Counts, errors: Iterable[Any], *, quiet: bool, out: str | None = None,
          wrote: Sequence[str] = ()) -> None:
    """The closing lines (counts; with ``wrote``, the files written under ``out``), then the exit when nothing
    scored (naming the top ``errors``)."""
    say(quiet, counts.line, *([f"wrote {out}/{', '.join(wrote)}"] if wrote else []))
    exit_if_unscored(command, errors, counts.scored)


#: what the commands that write the three standard outputs write
WROTE = ("per_item.parquet", "summary.parquet", "report.md")
