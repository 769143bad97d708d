"""The scoring stage's Ray Data faces: lexical metrics as tasks (:func:`score`) or a pool of actors
(:class:`Scoring`), and the model-based metrics' actors (:class:`ModelScoring`), under the names Ray Data shows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from evalcore.metrics.mir import score_batch as mir_batch
from evalcore.metrics.stage import ModelScorer, score_batch

SCORE_POOL_FROM = 10_000  # requests to run from which lexical scoring runs on a pool of actors


def score(batch: pa.Table, plan: Any) -> pa.Table:
    """The scoring stage (:func:`score_batch`) as Ray tasks, under the name Ray Data shows: ``score``."""
    return score_batch(batch, plan)


def score_mir(batch: pa.Table, protocols: Any) -> pa.Table:
    """The mir protocols' released rules on a judged batch (:func:`evalcore.metrics.mir.score_batch`) as Ray tasks,
    under the name Ray Data shows: ``score_mir``."""
    return mir_batch(batch, protocols)


class Scoring:
    """The scoring stage (:func:`score_batch`) as a Ray Data actor, under the name Ray Data shows: ``score``."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan

    def __call__(self, batch: pa.Table) -> pa.Table:
        return score_batch(batch, self.plan)


Scoring.__name__ = "score"  # (its qualified name stays Scoring: workers find the class by it)


class ModelScoring(ModelScorer):
    """The model-based metrics' stage (:class:`ModelScorer`) as a Ray Data actor, under the name Ray Data
    shows: ``score_models``."""


ModelScoring.__name__ = "score_models"
