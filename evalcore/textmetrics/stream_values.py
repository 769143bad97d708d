"""The per-pair free-form metric values the pipeline's stream stores in a judged row's ``scores``, and which
metrics it scores there.

After the judge, the stream (:mod:`evalcore.pipeline.stream_metrics`) scores every free-form row that is one
whole request (one chunk, no error) with its protocol's lexical metrics (BLEU, BLEU-4, METEOR, ROUGE of the
configured profile: :func:`lexical_plan`) and, on a pool of actors that keep their models loaded, its
model-based metrics that score one pair at a time (registered with ``stream = "model"``: BERTScore, CLAPText;
:func:`model_plan`). The values go into the row's ``scores`` (JSON: the profile, one value per metric and, for
the model-based ones, what their values depend on: :func:`encode`, :func:`merge`) and are committed with it;
the run's scorer (:class:`evalcore.scorers.freeform.FreeformScorer`) reads them back (:func:`decode`) and
computes only what is missing (a chunked request, a row committed by an older version, a row the stream could
not score): the same function on the same pair, so the same values. A metric with ``stream = None`` (CIDEr-D:
its value for one answer depends on the others, its IDF corpus) is not scored in the stream. Which metric goes
where is the registry's (:mod:`evalcore.textmetrics.freeform_metric`).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from evalcore.textmetrics.freeform_metric import of_stream
from evalcore.textmetrics.metric_config import FreeformMetrics


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
