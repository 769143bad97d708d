"""The free-form metric interface and the registry's view of it.

A free-form metric is one module in :mod:`evalcore.textmetrics.registered` (the registry's package: metric modules
only) with one ``@METRICS.register("name")`` class (:class:`FreeformMetric`): its settings (a frozen pydantic
``Params``, the config section ``section``), its definition text, its direction, the packages it imports, whether
it loads a model and on which device, where the pipeline scores it (``stream``) and :meth:`FreeformMetric.score`.
The config (:class:`evalcore.textmetrics.metric_config.FreeformMetrics`), the scoring stage
(:mod:`evalcore.scorers.freeform`), the stream (:mod:`evalcore.textmetrics.stream_values`), :func:`score_pairs
<evalcore.textmetrics.text_profiles.score_pairs>`, the resources and ``evalcore validate`` all read the registry:
no list of metric names is kept anywhere else.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, ClassVar, Hashable, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from evalcore.core.registry import Registry
from evalcore.textmetrics import registered as _registered  # the registry's package (its __init__ imports nothing)

__all__ = ["METRICS", "FreeformMetric", "MetricParams", "Scored", "guarded", "metric_class", "models_key", "of_stream",
           "ordered", "registered", "scoreable", "spread"]
#: per-row outcome of a metric: values, per-row errors (None = fine), provenance for run.json
Scored = tuple[list[float], list[str | None], dict[str, Any]]


class MetricParams(BaseModel):
    """Base of a metric's settings: frozen, unknown fields refused (``evalcore validate`` names them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class FreeformMetric:
    """One free-form metric of a profile with its settings; subclasses register with ``@METRICS.register``."""

    #: the settings' model (None: the metric takes none) and their key in a protocol's ``metrics`` config
    Params: ClassVar[type[MetricParams] | None] = None
    section: ClassVar[str | None] = None
    #: what is missing when the metric is listed but its settings are not (the config error's text)
    settings_hint: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = True
    #: in the default list of a protocol that names none (cheap, offline, no model files)
    default: ClassVar[bool] = False
    #: modules it imports (checked before a run: :mod:`evalcore.core.packages`) and libraries its definition names
    requires: ClassVar[tuple[str, ...]] = ()
    libraries: ClassVar[tuple[str, ...]] = ()
    #: where the pipeline scores it per pair, in the judged stream: "lexical" (scoring tasks, with the profile's
    #: lexical metrics), "model" (the metric actors holding models), None (only the run's scorer)
    stream: ClassVar[Literal["lexical", "model"] | None] = None
    #: row fields whose values make one corpus when a row's value depends on the others (CIDEr-D's IDF);
    #: such a metric is scored over all of a run's rows at once
    corpus: ClassVar[tuple[str, ...]] = ()
    #: settings fields its values depend on (the models, not where or in what batches they ran): values stored
    #: in the stream under other settings are computed again
    value_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, profile: str, params: MetricParams | None = None,
                 s3: Mapping[str, Any] | None = None, ray: bool = True) -> None:
        self.name, self.profile, self.params = name, profile, params
        self.s3 = dict(s3) if s3 else None
        self.ray = ray  # False: no Ray actors of its own (e.g. inside a metric actor of the stream)

    @classmethod
    def check(cls, params: MetricParams) -> None:
        """Config-time checks of settings beyond their fields (``ValueError("field: reason")``); none by default."""

    def definition(self) -> str:
        """What the value is: library, version, model, profile."""
        raise NotImplementedError

    def run_definition(self) -> str:
        """The definition a run's summary states (e.g. with the corpus or actors it used); default :meth:`definition`."""
        return self.definition()

    def device(self) -> str | None:
        """Where its model runs (e.g. ``cuda``), None when it loads no model."""
        return None

    def ray_actors(self) -> int:
        """Ray actors of its own that the run's scorer uses (its call then runs beside the others); 0: none
        (and always 0 when built with ``ray=False``)."""
        return 0

    def problems(self) -> list[tuple[str, str]]:
        """What would make every row fail here, before any model runs: ``(field, reason)``, the field relative to
        the protocol's ``metrics`` config (``names`` for the metric itself)."""
        return []

    def score(self, references: Sequence[Any], candidates: Sequence[Any], checks: Sequence[str | None],
              corpora: Sequence[Hashable] | None, loaded: dict) -> Scored:
        """Values and per-row errors for the rows whose check is None (fine) or "" (an empty candidate, 0.0);
        ``loaded``: a cache for models kept between calls. Provenance goes in the third element."""
        raise NotImplementedError


def scoreable(checks: Sequence[str | None], empty_too: bool = False) -> list[int]:
    """The rows a metric scores: those that passed the checks (and, ``empty_too``, the empty candidates)."""
    return [i for i, e in enumerate(checks) if e is None or (empty_too and e == "")]


def guarded(metric: str, n: int, fn: Callable[[], list[float]]) -> tuple[list[float], list[str | None]]:
    """``fn()``'s values with no errors, or NaN and the exception as every row's error."""
    try:
        return fn(), [None] * n
    except Exception as e:  # a whole-metric failure (e.g. a Ray actor died) becomes every row's error
        return [math.nan] * n, [f"{metric}: {type(e).__name__}: {e}"[:300]] * n


def spread(checks: Sequence[str | None], rows: Sequence[int], values: Sequence[float],
           errors: Sequence[str | None]) -> tuple[list[float], list[str | None]]:
    """Per-row values and errors from those of ``rows``: NaN for a row that failed its checks, 0.0 for an empty
    candidate not among ``rows``, NaN and the error for a row whose value failed."""
    out = [math.nan if e not in (None, "") else 0.0 for e in checks]
    errs: list[str | None] = [None] * len(checks)
    for i, v, e in zip(rows, values, errors):
        out[i], errs[i] = (math.nan, e) if e else (v, None)
    return out, errs


#: the free-form metrics by the name a config lists: ``@METRICS.register("name")`` on a :class:`FreeformMetric`;
#: loads the modules of :mod:`evalcore.textmetrics.registered` on first use
METRICS: Registry[FreeformMetric] = Registry("metric", _registered.__name__)


def metric_class(name: str) -> type[FreeformMetric]:
    return METRICS.get(name)  # type: ignore[return-value]


def registered() -> list[str]:
    """The registered metric names in their stated order: the lexical engine's (BLEU, BLEU-4, METEOR, ROUGE),
    then the others by name. Versions and definitions are listed in this order."""
    return sorted(METRICS.names(), key=lambda n: (metric_class(n).stream != "lexical", n))


def ordered(names: Sequence[str]) -> list[str]:
    """``names`` in the stated order (:func:`registered`: versions and definitions read the same whatever the
    config's order)."""
    return [n for n in registered() if n in names]


def of_stream(names: Sequence[str], stream: str | None) -> list[str]:
    """Those of ``names`` the pipeline scores in ``stream`` ("lexical", "model"; None: only the run's scorer)."""
    return [n for n in names if metric_class(n).stream == stream]


def models_key(metrics: Mapping[str, Any]) -> str:
    """What the values of a protocol's model-based metrics depend on (``metrics``: a :class:`FreeformMetrics` as a
    dict), as stored with their values in a row's ``scores``: a scorer configured otherwise computes its own."""
    out = {}
    for name in ordered(metrics.get("names") or []):
        cls = metric_class(name)
        if cls.value_fields:
            section = cls.section or name
            out[section] = {f: (metrics.get(section) or {}).get(f) for f in cls.value_fields}
    return json.dumps(out, sort_keys=True)

