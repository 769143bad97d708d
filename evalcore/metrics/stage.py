"""Per-request lexical metrics as a stage of the streaming pipeline, on the workers' batches.

After the judge, :func:`score_batch` scores every free-form row that is one whole request (one chunk, no
error) with its protocol's lexical metrics (BLEU, BLEU-4, METEOR, ROUGE of the configured profile), by
:func:`evalcore.metrics.text_profiles.score_pairs` in the worker itself, each distinct (reference, answer)
pair once per worker process. The values go into the judged row's ``scores`` (JSON: the profile and one
value per metric) and are committed with it; the run's scorer (:class:`evalcore.metrics.freeform.FreeformScorer`)
takes them as they are and computes only what is missing (a chunked request, a row committed by an older
version, a row ``score_pairs`` gave an error): the same function on the same pair, so the same values.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import pyarrow as pa

#: (profile, metrics, reference, answer) → the values, per worker process; cleared when it grows past CACHE_MAX
_CACHE: dict[tuple, dict[str, float]] = {}
CACHE_MAX = 200_000


def lexical_plan(protocols: Mapping[str, tuple[str, Sequence[str]]]) -> dict[str, tuple[str, list[str]]]:
    """protocol instance → (profile, its lexical metric names) for the instances that have some."""
    from evalcore.metrics.text_profiles import METRICS

    plan = {}
    for name, (profile, names) in protocols.items():
        lexical = [m for m in names if m in METRICS]
        if lexical:
            plan[name] = (profile, lexical)
    return plan


def encode(profile: str, values: Mapping[str, float]) -> str:
    return json.dumps({"profile": profile, **values}, sort_keys=True)


def decode(scores: str | None, profile: str, metrics: Sequence[str]) -> dict[str, float] | None:
    """The values of ``metrics`` stored in a row's ``scores`` under ``profile``, or None when any is missing."""
    if not scores:
        return None
    got = json.loads(scores)
    if got.get("profile") != profile or any(m not in got for m in metrics):
        return None
    return {m: float(got[m]) for m in metrics}


def _score(profile: str, metrics: list[str], pairs: list[tuple[Any, Any]]) -> list[dict[str, float] | None]:
    from evalcore.metrics.text_profiles import score_pairs

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
