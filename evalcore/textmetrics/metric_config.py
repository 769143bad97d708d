"""The free-form metrics' part of the run config: a protocol's ``metrics`` (profile, names, settings), read off
the metric registry (:data:`evalcore.textmetrics.freeform_metric.METRICS`).

Like a model's ``kind`` and ``params``, a metric name and its settings are checked against what is registered:
the registry loads this package's metric modules when it is first read, and each metric that takes settings
declares their frozen pydantic model (``Params``) and the key they live under (``section``). A mistake comes
back as one line naming the field (``protocols.0.metrics.bertscore.model: Field required``). ``config.py``
imports :class:`FreeformMetrics` from here.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evalcore.core.params import ParamsError, did_you_mean, value_reason
from evalcore.textmetrics.freeform_metric import METRICS, MetricParams, of_stream, registered

__all__ = ["FreeformMetrics", "MetricParams", "Profile", "model_devices", "registered"]

Profile = Literal["mullama", "standard"]


def _reason(err: Any, params: type[BaseModel]) -> str:
    """A settings mistake in the project's words: "did you mean" for an unknown field, bounds as ``must be >= 1``."""
    if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
        return did_you_mean(err["loc"][0], params.model_fields)
    return value_reason(err) or err["msg"]


def default_names() -> list[str]:
    return [n for n in registered() if METRICS.get(n).default]


class FreeformMetrics(BaseModel):
    """A free-form protocol's metrics: a profile, metric names and, per metric that takes them, its settings
    under its ``section`` (``bertscore: {model: ...}``, ``clap: {...}``). The default (the registered ``default``
    metrics: mullama BLEU, BLEU-4, METEOR, ROUGE) needs no model files."""

    model_config = ConfigDict(extra="allow", frozen=True)

    profile: Profile = "mullama"
    names: list[str] = Field(default_factory=default_names, min_length=1)
    #: a chunked model's answer (one text per chunk): ``join`` scores the chunks' texts joined by a newline as one
    #: answer; ``mean`` scores each chunk's text against the reference and averages the chunks' values
    chunks: Literal["join", "mean"] = "join"

    @model_validator(mode="before")
    @classmethod
    def _settings(cls, data: Any) -> Any:
        """Every key besides profile and names is a registered metric's section, validated by its ``Params``."""
        if not isinstance(data, dict):
            return data
        out, problems = dict(data), []
        sections = {(c.section or n): c for n in registered() if (c := METRICS.get(n)).Params is not None}
        for key, value in data.items():
            if key in cls.model_fields:
                continue
            if key not in sections:
                problems.append((key, did_you_mean(key, [*cls.model_fields, *sections])))
            elif value is not None and not isinstance(value, sections[key].Params):
                try:
                    out[key] = sections[key].Params.model_validate(value)
                except ValidationError as e:
                    problems += [(".".join(str(p) for p in (key, *err["loc"])), _reason(err, sections[key].Params))
                                 for err in e.errors()]
        if problems:
            raise ParamsError(problems)
        return out

    @field_validator("names")
    @classmethod
    def _known_names(cls, v: list[str]) -> list[str]:
        known = registered()
        unknown = [n for n in v if n not in known]
        if unknown:
            raise ValueError(f"unknown metric(s) {unknown}; known: {', '.join(known)}")
        if len(set(v)) != len(v):
            raise ValueError("metric names must not repeat")
        return v

    @model_validator(mode="after")
    def _settings_present(self) -> "FreeformMetrics":
        for name in self.names:
            cls = METRICS.get(name)
            if not cls.higher_is_better:
                raise ValueError(f"names: {name} is lower-is-better, and the report's paired differences and verdicts "
                                 "read a difference above 0 as better: only higher-is-better metrics run for now")
            if cls.Params is None:
                continue
            params = self.settings(name)
            if params is None:
                raise ValueError(f"names has {name} but {cls.settings_hint or (cls.section or name) + ' is not set'}")
            cls.check(params)
        return self

    def settings(self, name: str) -> MetricParams | None:
        """The settings of metric ``name`` (None when it takes none or none are given)."""
        cls = METRICS.get(name)
        return (self.model_extra or {}).get(cls.section or name) if cls.Params is not None else None

    def built(self, s3: Mapping[str, Any] | None = None, names: Sequence[str] | None = None) -> dict[str, Any]:
        """name → the metric built with this profile and its settings (``s3``: the run's S3 options)."""
        return {n: METRICS.get(n)(n, self.profile, self.settings(n), s3)
                for n in (self.names if names is None else names)}  # FreeformMetric instances


def model_devices(metrics: FreeformMetrics) -> list[str]:
    """The devices of the metrics the stream's metric actors run (``stream = "model"``)."""
    return [d for m in metrics.built(names=of_stream(metrics.names, "model")).values() if (d := m.device())]
