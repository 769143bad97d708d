"""The scoring stage's Ray Data faces: lexical metrics as tasks (:func:`score`) or a pool of actors
(:class:`Scoring`), and the model-based metrics' actors (:class:`ModelScoring`), under the names Ray Data shows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from evalcore.metrics.stage import ModelScorer, score_batch
from evalcore.metrics.text_profiles import score_pairs

SCORE_POOL_FROM = 10_000  # requests to run from which lexical scoring runs on a pool of actors


def score(batch: pa.Table, plan: Any) -> pa.Table:
    """The scoring stage (:func:`score_batch`) as Ray tasks, under the name Ray Data shows: ``score``."""
    return score_batch(batch, plan)


class Scoring:
    """The scoring stage (:func:`score_batch`) as a Ray Data actor, under the name Ray Data shows: ``score``."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        # the metrics' resources (WordNet, tokenizers) load at their first pair: here, while the models start, not
        # on the first batch (its first 256 MusicQA rows took 50 s against 2.4 s for the next on a loaded machine)
        for profile, metrics in plan.values():
            score_pairs(["warm-up"], ["warm-up"], profile=profile, metrics=metrics, workers=1)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return score_batch(batch, self.plan)


Scoring.__name__ = "score"  # (its qualified name stays Scoring: workers find the class by it)


class ModelScoring(ModelScorer):
    """The model-based metrics' stage (:class:`ModelScorer`) as a Ray Data actor, under the name Ray Data
    shows: ``score_models``."""


ModelScoring.__name__ = "score_models"
