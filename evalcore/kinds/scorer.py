"""The interface a protocol kind's scorer implements (:attr:`evalcore.kinds.base.ProtocolKind.scorer`): per-request
metric columns plus aggregate definitions. The scorers of the built-in kinds are in :mod:`evalcore.scorers`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import pandas as pd

from evalcore.stats.aggregate import Aggregate, mean_item_stats


class Scorer(ABC):
    """Scores one protocol's responses."""

    protocol: str
    #: per-request metric columns written to tables/per_item.parquet
    columns: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    #: aggregates over scored *and* errored requests, an errored one filled in by :meth:`error_fill`
    #: (e.g. MCQ accuracy counting errors as wrong); reported beside ``aggregates`` (evalcore.scoring.denominators)
    with_errors: tuple[Aggregate, ...] = ()
    #: the per-item columns besides the keys (``SCORE_KEY``) and ``columns`` that the summary reads of this
    #: protocol's rows (None: any); a run keeps only these in the driver for its summary
    summary_columns: tuple[str, ...] | None = None

    def aggregates_of(self, df: pd.DataFrame) -> tuple[Aggregate, ...]:
        """The aggregates of these per-item rows (one protocol instance's): by default :attr:`aggregates`; a scorer
        whose figures depend on what its rows carry (MCQ: a published rule's strict twin) says so here."""
        return self.aggregates

    def with_errors_of(self, df: pd.DataFrame) -> tuple[Aggregate, ...]:
        """The ``with_errors`` aggregates of these per-item rows (default :attr:`with_errors`)."""
        return self.with_errors

    def error_fill(self, row: dict[str, Any]) -> dict[str, float]:
        """The metric columns of ``with_errors`` for an errored request ``row`` (what an empty answer scores)."""
        return {}

    @abstractmethod
    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        """Metric columns for each merged request row (one judged row per request); a row's dict may hold
        ``error`` (a reason string) when that row cannot be scored: it then becomes an error row."""

    def provenance(self) -> dict[str, Any]:
        """What the last :meth:`score` call used (library versions, models, ...), for run.json; none by default."""
        return {}

    def item_stats(self, df: pd.DataFrame, columns: list[str], unit: str = "item_id") -> pd.DataFrame:
        """Per-item statistics (rows = items, sorted) that aggregates average; by default
        :func:`mean_item_stats`."""
        return mean_item_stats(df, columns, unit)

    def spread_rows(self, df: pd.DataFrame) -> list[dict[str, Any]]:
        """Extra value-only rows for one group (e.g. spread over option orders); none by default."""
        return []
