"""The stream's free-form metrics: the per-pair values of each free-form row scored in the Ray Data stream right
after the judge, as Ray tasks or actors, and stored in the row's ``scores`` (:mod:`evalcore.textmetrics.stream_values`
says what is stored and which metrics go where).

* The lexical metrics of a protocol's profile (:func:`lexical_metrics_batch`): in the worker itself, by
  :func:`evalcore.textmetrics.text_profiles.score_pairs`, each distinct (reference, answer) pair once per worker
  process; as Ray tasks (:func:`lexical_metrics`), or from :data:`SCORE_POOL_FROM` requests on a pool of actors
  (:class:`LexicalMetricsActor`).
* The model-based metrics that score one pair at a time (:class:`ModelMetricsActor`): a pool of actors that load
  the models once (on a GPU where the metric's ``device`` is cuda).

Ray Data shows these stages as ``score`` and ``score_models``. The names of a role ("scoring" is the stage of
:mod:`evalcore.scoring`, a "scorer" a protocol kind's :class:`evalcore.kinds.scorer.Scorer`): docs/layers.md.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import pyarrow as pa

from evalcore.scorers.mir import score_batch as mir_batch
from evalcore.textmetrics.freeform_metric import models_key
from evalcore.textmetrics.metric_config import model_devices
from evalcore.textmetrics.metric_config import FreeformMetrics
from evalcore.textmetrics.stream_values import encode, merge
from evalcore.textmetrics.text_profiles import model_metrics, score_pairs

SCORE_POOL_FROM = 10_000  # requests to run from which lexical scoring runs on a pool of actors

#: (profile, metrics, reference, answer) → the values, per worker process; cleared when it grows past CACHE_MAX
_CACHE: dict[tuple, dict[str, float]] = {}
CACHE_MAX = 200_000


def _score(profile: str, metrics: list[str], pairs: list[tuple[Any, Any]]) -> list[dict[str, float] | None]:
    keys = [(profile, tuple(metrics), r, c) for r, c in pairs]
    todo = list(dict.fromkeys(k for k in keys if k not in _CACHE))
    if todo:
        got = score_pairs([k[2] for k in todo], [k[3] for k in todo], profile=profile, metrics=metrics, workers=1)
        if len(_CACHE) + len(todo) > CACHE_MAX:
            _CACHE.clear()
        for i, k in enumerate(todo):
            _CACHE[k] = None if got.errors[i] is not None else {m: got.values[m][i] for m in metrics}
    return [_CACHE.get(k) for k in keys]


def lexical_metrics_batch(batch: pa.Table, plan: Mapping[str, tuple[str, list[str]]]) -> pa.Table:
    """``batch`` (judged rows) with ``scores`` set on its free-form rows that are whole requests without error."""
    if not plan or batch.num_rows == 0:
        return batch
    cols = {k: batch.column(k).to_pylist() for k in ("protocol", "n_chunks", "error", "reference", "text")}
    scores = batch.column("scores").to_pylist()
    for proto, (profile, metrics) in plan.items():
        idx = [i for i, p in enumerate(cols["protocol"]) if p == proto and cols["error"][i] is None
               and int(cols["n_chunks"][i] or 1) == 1]
        if not idx:
            continue
        values = _score(profile, metrics, [(cols["reference"][i], cols["text"][i]) for i in idx])
        for i, v in zip(idx, values):
            scores[i] = encode(profile, v) if v is not None and not any(math.isnan(x) for x in v.values()) else None
    return batch.set_column(batch.schema.get_field_index("scores"), batch.schema.field("scores"),
                            pa.array(scores, pa.string()))


def lexical_metrics(batch: pa.Table, plan: Any) -> pa.Table:
    """The lexical metrics (:func:`lexical_metrics_batch`) as Ray tasks, under the name Ray Data shows: ``score``."""
    return lexical_metrics_batch(batch, plan)


lexical_metrics.__name__ = "score"  # (its qualified name stays lexical_metrics: workers find it by that)


class LexicalMetricsActor:
    """The lexical metrics (:func:`lexical_metrics_batch`) as a Ray Data actor, under the name Ray Data shows:
    ``score``."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        # the metrics' resources (WordNet, tokenizers) load at their first pair: here, while the models start, not
        # on the first batch (its first 256 MusicQA rows took 50 s against 2.4 s for the next on a loaded machine)
        for profile, metrics in plan.values():
            score_pairs(["warm-up"], ["warm-up"], profile=profile, metrics=metrics, workers=1)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return lexical_metrics_batch(batch, self.plan)


LexicalMetricsActor.__name__ = "score"  # (its qualified name stays LexicalMetricsActor: workers find it by that)


class ModelMetricsActor:
    """The model-stream metrics of every protocol instance in ``plan``
    (:func:`evalcore.textmetrics.stream_values.model_plan`) on judged batches, their models loaded at the first
    batch and kept; each distinct pair scored once per actor; Ray Data shows the stage as ``score_models``.

    A pair the metrics cannot score, or a batch whose models fail to load, is left without these values:
    the run's scorer computes them again and records the reason as the row's error (stage ``score``)."""

    def __init__(self, plan: Mapping[str, tuple[str, list[str], dict[str, Any]]],
                 s3: Mapping[str, Any] | None = None) -> None:
        self.plan = dict(plan)
        # the models embed here, not on actors of their own
        self.models = {p: model_metrics(FreeformMetrics.model_validate(cfg), s3, ray=False)
                       for p, (_, _, cfg) in self.plan.items()}
        self.keys = {p: models_key(cfg) for p, (_, _, cfg) in self.plan.items()}
        self.cache: dict[tuple, dict[str, float] | None] = {}
        self.failed: set[str] = set()  # protocol instances whose metrics could not run at all: not tried again

    def __call__(self, batch: pa.Table) -> pa.Table:
        if batch.num_rows == 0:
            return batch
        cols = {k: batch.column(k).to_pylist() for k in ("protocol", "n_chunks", "error", "reference", "text")}
        scores = batch.column("scores").to_pylist()
        for proto, (profile, metrics, _) in self.plan.items():
            if proto in self.failed:
                continue
            idx = [i for i, p in enumerate(cols["protocol"]) if p == proto and cols["error"][i] is None
                   and int(cols["n_chunks"][i] or 1) == 1]
            keys = [(proto, cols["reference"][i], cols["text"][i]) for i in idx]
            todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
            if todo and not self._score(profile, metrics, self.models[proto], todo):
                self.failed.add(proto)
                continue
            for i, k in zip(idx, keys):
                v = self.cache.get(k)
                if v is not None and not any(math.isnan(x) for x in v.values()):
                    scores[i] = merge(scores[i], profile, v, self.keys[proto])
        return batch.set_column(batch.schema.get_field_index("scores"), batch.schema.field("scores"),
                                pa.array(scores, pa.string()))

    def _score(self, profile: str, metrics: list[str], models: Any, todo: list[tuple]) -> bool:
        """Scores ``todo`` into the cache; False when the metrics could not run at all."""
        if len(self.cache) + len(todo) > CACHE_MAX:
            self.cache.clear()
        try:
            got = score_pairs([k[1] for k in todo], [k[2] for k in todo], profile=profile, metrics=metrics,
                              models=models)
        except Exception:  # e.g. a model that does not load: the run's scorer records why, per row
            return False
        for i, k in enumerate(todo):
            self.cache[k] = None if got.errors[i] is not None else {m: got.values[m][i] for m in metrics}
        return True

    @staticmethod
    def uses_gpu(metrics: FreeformMetrics) -> bool:
        """Whether a protocol's ``metrics`` put a model of this stage on a cuda device (its actors then hold a GPU)."""
        return any(d.startswith("cuda") for d in model_devices(metrics))


ModelMetricsActor.__name__ = "score_models"  # (its qualified name stays ModelMetricsActor)


def mir_rules(batch: pa.Table, protocols: Any, similarity: Any = None) -> pa.Table:
    """The mir protocols' released rules on a judged batch (:func:`evalcore.scorers.mir.score_batch`) as Ray tasks,
    under the name Ray Data shows: ``mir_rules`` (``similarity``: protocol → its configured embedder)."""
    return mir_batch(batch, protocols, similarity)
