"""The nightly config: a run config's suite (:class:`evalcore.runconfig.config.SuiteConfig`: datasets, protocols, stats,
storage …) plus checkpoint series.

A *series* names a checkpoint prefix (a local directory or ``s3://`` prefix) whose direct sub-prefixes
are checkpoints, and a model template whose ``checkpoint_param`` is set to each checkpoint's URI. Each
checkpoint becomes one ordinary run (:class:`evalcore.runconfig.config.RunConfig`) under
``<root>/runs/<series>/<checkpoint>/``, so everything a run config checks is checked here too.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from evalcore.runconfig import preflight

from evalcore.core import storage
from evalcore.runconfig.config import (ConfigError, ModelSpec, RunConfig, Strict, SuiteConfig, error_lines, parse_config,
                             read_yaml)

NAME = r"^[A-Za-z0-9._-]+$"


class ModelTemplate(ModelSpec):
    """The model of every checkpoint of a series (a run's model without its name); ``params[checkpoint_param]``
    is the checkpoint's URI."""

    checkpoint_param: str = "checkpoint"

    def run_model(self, name: str, uri: str) -> dict[str, Any]:
        """The run's model (as a mapping): this template named ``name``, evaluating the checkpoint at ``uri``."""
        spec = self.model_dump(exclude={"checkpoint_param"})
        return {"name": name, **spec, "params": {**self.params, self.checkpoint_param: uri}}


class SeriesConfig(Strict):
    """One model family's checkpoints."""

    name: str = Field(pattern=NAME)
    #: local directory or s3:// prefix; its direct sub-directories / sub-prefixes are the checkpoints
    prefix: str = Field(min_length=1)
    model: ModelTemplate
    #: only checkpoints holding this file count (a half-written checkpoint is never evaluated); None = all
    ready_marker: str | None = None
    #: natural: names sorted with digit runs as numbers (step-999 < step-1000)
    order: Literal["natural"] = "natural"
    #: a checkpoint name every new checkpoint is also compared with
    baseline: str | None = None
    #: the training step of a checkpoint, for the trackers: the first group of this regular expression searched in
    #: its name (default: its last run of digits, step-1500 → 1500); a trainer_state.json in the checkpoint wins
    #: (its global_step)
    step_pattern: str = r"(\d+)(?!.*\d)"

    @field_validator("prefix")
    @classmethod
    def _prefix_given(cls, v: str) -> str:
        if not v.strip() or v.strip() in ("s3://", "file://"):
            raise ValueError("empty: give a local directory or an s3:// prefix")
        return v

    @field_validator("step_pattern")
    @classmethod
    def _one_group(cls, v: str) -> str:
        try:
            groups = re.compile(v).groups
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from None
        if groups < 1:
            raise ValueError("needs a group around the step's digits, e.g. 'step-(\\d+)'")
        return v

    @field_validator("ready_marker", "baseline")
    @classmethod
    def _bare_name(cls, v: str | None) -> str | None:
        """A file (ready marker) or checkpoint (baseline) name inside each checkpoint / the prefix, not a path."""
        if v is not None and (not v.strip() or v in (".", "..") or "/" in v or "\\" in v):
            raise ValueError(f"{v!r} is not a bare name: give the name alone (e.g. _SUCCESS, step-1000), "
                             "not a path; it is looked up under each checkpoint / the series prefix")
        return v


class MinEffect(Strict):
    """The smallest |difference| that counts as a regression: per metric, else ``default``."""

    default: float = Field(0.05, ge=0)
    metrics: dict[str, float] = Field(default_factory=dict)

    def of(self, metric: str) -> float:
        return self.metrics.get(metric, self.default)


class Notify(Strict):
    """A webhook told about every night (a Slack-compatible ``{"text": …}`` POST). The URL is a secret: only
    the name of the environment variable that holds it is written in the config."""

    url_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    timeout_s: float = Field(10.0, gt=0, le=120)


class NightlyConfig(SuiteConfig):
    """A suite (every checkpoint's run takes it whole) plus the checkpoint series and the nightly's own settings."""

    series: list[SeriesConfig] = Field(min_length=1)
    #: checkpoints evaluated per series and night, newest first
    max_new_per_night: int = Field(3, ge=1)
    #: a checkpoint that failed this many times is not tried again
    max_attempts: int = Field(3, ge=1)
    #: exit 3 when a comparison is flagged
    fail_on_regression: bool = False
    min_effect: MinEffect = Field(default_factory=MinEffect)
    #: significance level of the (Holm-corrected) comparisons
    alpha: float = Field(0.05, gt=0, lt=1)
    #: a lease on a checkpoint lasts this long unless renewed (it is renewed while the evaluation runs)
    lease_seconds: float = Field(3600.0, gt=0)
    #: only on a store without conditional writes (leases then fall back to write, wait this long, read back)
    lease_settle_seconds: float = Field(2.0, ge=0)
    #: a webhook told about every night (tonight's verdicts and where the dashboard is)
    notify: Notify | None = None

    @field_validator("series")
    @classmethod
    def _unique_names(cls, v: list[SeriesConfig]) -> list[SeriesConfig]:
        names = [s.name for s in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"duplicate name(s) {dup}: each series needs its own name (its runs and ledger rows)")
        return v


#: the fields each checkpoint's run takes from the nightly's suite (all but its name, and its trackers: the nightly
#: logs each checkpoint itself, with its training step and flags, evalcore.nightly.tracked)
SUITE_FIELDS = tuple(n for n in SuiteConfig.model_fields if n not in ("name", "tracking"))


def run_config_dict(cfg: NightlyConfig, series: SeriesConfig, checkpoint: str, uri: str, root: str) -> dict:
    """The run config (as a mapping) that evaluates ``checkpoint`` (at ``uri``) of ``series`` into ``root``: the
    nightly's suite, rooted at ``root``, with the series' model."""
    data = cfg.model_dump(include=set(SUITE_FIELDS), exclude_none=False)
    data["storage"] = {**data["storage"], "root": root}
    name = f"{series.name}-{checkpoint}"[:120].replace("/", "-")
    return {"name": name, "models": [series.model.run_model(series.name, uri)], **data}


def run_config(cfg: NightlyConfig, series: SeriesConfig, checkpoint: str, uri: str, root: str) -> RunConfig:
    """The run config that evaluates ``checkpoint`` (at ``uri``) of ``series`` into ``root``."""
    return parse_config(run_config_dict(cfg, series, checkpoint, uri, root))


def as_series_field(line: str, i: int) -> str:
    """A run config's problem line said of series ``i``: ``models.0.params.x: …`` → ``series.i.model.params.x: …``
    (the model is the series' template; its name is the series' name); suite fields keep their own path."""
    line = line.removeprefix("(top level): ")
    if line.startswith("models.0.name"):
        return f"series.{i}.name" + line[len("models.0.name"):]
    if line.startswith("models.0"):
        return f"series.{i}.model" + line[len("models.0"):]
    return line


def series_problems(cfg: NightlyConfig, uris: dict[str, str] | None = None) -> list[str]:
    """One ``<field>: <reason>`` line per problem of the suite plus each series' model as a run config, the
    template's ``checkpoint_param`` set to ``uris[series name]`` (default: the series prefix, a stand-in that
    only the path checks of :mod:`evalcore.runconfig.preflight` would look into)."""
    out: list[str] = []
    for i, s in enumerate(cfg.series):
        uri = (uris or {}).get(s.name, s.prefix)
        try:
            rcfg = RunConfig.model_validate(run_config_dict(cfg, s, "checkpoint", uri, cfg.root))
        except ValidationError as e:
            out += [x for x in (as_series_field(line, i) for line in error_lines(e)) if x not in out]
            continue
        out += [x for x in (as_series_field(line, i) for line in preflight.config_problems(rcfg)) if x not in out]
    return out


def resolve_prefixes(cfg: NightlyConfig) -> NightlyConfig:
    """``cfg`` with each relative local series prefix made absolute under the nightly root (``storage.root``, else
    ./runs/<name>), so ``prefix: checkpoints/x`` means ``<root>/checkpoints/x`` wherever the nightly runs;
    absolute paths and ``s3://`` prefixes are unchanged. Call it after ``--out`` has set the root."""
    series = [s.model_copy(update={"prefix": storage.absolute(s.prefix, base=cfg.root)}) if is_relative(s.prefix)
              else s for s in cfg.series]
    return cfg.model_copy(update={"series": series})


def is_relative(prefix: str) -> bool:
    """Whether ``prefix`` is a relative local path (read under the nightly root)."""
    return "://" not in prefix and not os.path.isabs(os.path.expanduser(prefix))


def parse_nightly(data: Any) -> NightlyConfig:
    """Validate a nightly config mapping; raises :class:`ConfigError` naming the bad fields."""
    if not isinstance(data, dict):
        raise ConfigError(f"invalid nightly config: expected a mapping at the top level, got {type(data).__name__}")
    try:
        cfg = NightlyConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError("invalid nightly config:\n" + "\n".join(f"  {x}" for x in error_lines(e, NightlyConfig)))
    found = series_problems(cfg)  # the suite plus each series' model must be a valid run config
    if found:
        raise ConfigError("invalid nightly config:\n" + "\n".join(f"  {x}" for x in found))
    return cfg


def load_nightly(path: str | Path) -> NightlyConfig:
    """Read and validate a YAML nightly config file."""
    return parse_nightly(read_yaml(path, "nightly config"))
