"""Per-request free-form metrics as stages of the streaming pipeline, on the workers' batches.

After the judge, :func:`score_batch` scores every free-form row that is one whole request (one chunk, no
error) with its protocol's lexical metrics (BLEU, BLEU-4, METEOR, ROUGE of the configured profile), by
:func:`evalcore.metrics.text_profiles.score_pairs` in the worker itself, each distinct (reference, answer)
pair once per worker process. The values go into the judged row's ``scores`` (JSON: the profile and one
value per metric) and are committed with it; the run's scorer (:class:`evalcore.metrics.freeform.FreeformScorer`)
takes them as they are and computes only what is missing (a chunked request, a row committed by an older
version, a row ``score_pairs`` gave an error): the same function on the same pair, so the same values.

The model-based metrics that score one pair at a time (registered with ``stream = "model"``: BERTScore,
CLAPText) follow in a stage of their own, :class:`ModelScorer`, run by a pool of actors that load the models
once (on a GPU where the metric's ``device`` is cuda); their values join the same ``scores``. A metric with
``stream = None`` (CIDEr-D: its value for one answer depends on the others, its IDF corpus) is not scored in
the stream. Which metric goes where is the registry's (:mod:`evalcore.metrics.freeform_metric`).
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import pyarrow as pa

from evalcore.metrics.freeform_metric import model_devices, models_key, of_stream
from evalcore.metrics.metric_config import FreeformMetrics
from evalcore.metrics.text_profiles import model_metrics, score_pairs

#: (profile, metrics, reference, answer) → the values, per worker process; cleared when it grows past CACHE_MAX
_CACHE: dict[tuple, dict[str, float]] = {}
CACHE_MAX = 200_000


def lexical_plan(protocols: Mapping[str, tuple[str, Sequence[str]]]) -> dict[str, tuple[str, list[str]]]:
    """protocol instance → (profile, its metric names scored in the lexical stream) for the instances that have
    some."""
    plan = {}
    for name, (profile, names) in protocols.items():
        lexical = of_stream(names, "lexical")
        if lexical:
            plan[name] = (profile, lexical)
    return plan


def encode(profile: str, values: Mapping[str, float]) -> str:
    return json.dumps({"profile": profile, **values}, sort_keys=True)


def decode(scores: str | None, profile: str, metrics: Sequence[str], models: str | None = None
           ) -> dict[str, float] | None:
    """The values of ``metrics`` stored in a row's ``scores`` under ``profile``, or None when any is missing, or
    when a model-based one was scored with other models than ``models`` (:func:`models_key`)."""
    if not scores:
        return None
    got = json.loads(scores)
    if got.get("profile") != profile or any(m not in got for m in metrics):
        return None
    if of_stream(metrics, "model") and got.get("models") != models:
        return None
    return {m: float(got[m]) for m in metrics}


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


def score_batch(batch: pa.Table, plan: Mapping[str, tuple[str, list[str]]]) -> pa.Table:
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


def model_plan(protocols: Mapping[str, FreeformMetrics]) -> dict[str, tuple[str, list[str], dict[str, Any]]]:
    """protocol instance → (profile, its metrics of the model stream, its metrics config as a dict) for the
    instances that have some; ``protocols``: name → :class:`FreeformMetrics`."""
    return {name: (m.profile, names, m.model_dump()) for name, m in protocols.items()
            if (names := of_stream(m.names, "model"))}


def merge(scores: str | None, profile: str, values: Mapping[str, float], models: str) -> str:
    """``scores`` (a row's JSON, or None) with ``values`` (scored with ``models``, :func:`models_key`) added;
    values of another profile are dropped."""
    got = json.loads(scores) if scores else {}
    kept = {k: v for k, v in got.items() if k != "profile"} if got.get("profile") == profile else {}
    return encode(profile, {**kept, **values, "models": models})


class ModelScorer:
    """The model-stream metrics of every protocol instance in ``plan`` (:func:`model_plan`) on judged
    batches, their models loaded at the first batch and kept; each distinct pair scored once per scorer.

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
