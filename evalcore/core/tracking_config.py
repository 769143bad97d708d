"""The ``tracking:`` block of a run or nightly config: where a finished run's results are also sent.

A list of sinks, each optional and independent (``kind`` picks one; :mod:`evalcore.tracking` writes them):

* ``mlflow``: one MLflow run per model (and checkpoint) in ``experiment`` at ``uri`` (default
  ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db``: MLflow's own local store, no server);
* ``wandb``: one Weights & Biases run per model in ``project`` (``mode: offline`` writes ``./wandb/`` for
  ``wandb sync`` later);
* ``lm_eval``: ``results_<datetime>.json`` and ``samples_<task>_<datetime>.jsonl`` per model under ``out``
  (default ``<run root>/lm_eval``), as lm-evaluation-harness writes them.

The block holds no secret: keys and tokens come only from the environment (``MLFLOW_TRACKING_TOKEN``,
``MLFLOW_TRACKING_USERNAME`` / ``_PASSWORD``, ``WANDB_API_KEY``), so a URI carrying credentials
(``https://user:token@host``) is refused here, before it could be written to the run's ``config.yaml``.
This module imports only pydantic (and :mod:`evalcore.core.packages`, the standard library's), so ``config.py`` reads it
without pulling the tracking package in.
"""

from __future__ import annotations

import urllib.parse
from typing import Annotated, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from evalcore.core.packages import install

#: the URI schemes MLflow's tracking stores answer to (a bare path is a local file store)
MLFLOW_SCHEMES = ("sqlite", "file", "http", "https", "databricks", "databricks-uc", "uc", "postgresql", "mysql",
                  "mssql")
DEFAULT_MLFLOW_URI = "sqlite:///mlflow.db"
#: the command that installs the optional packages of the sinks (pyproject's extra), from any directory: this
#: interpreter's pip and the checkout's absolute path, as validate's other hints (:func:`evalcore.core.packages.install`)
TRACKING_EXTRA = install("tracking")


class _Sink(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot name an MLflow tracking store (None when it can): unparseable, an unknown scheme, or
    credentials in it."""
    try:
        parts = urllib.parse.urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError as e:
        return f"cannot be parsed as a URI ({e})"
    if parts.username is not None or parts.password is not None:
        return ("carries credentials; give the bare URI and put them in MLFLOW_TRACKING_USERNAME / "
                "MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN")
    if parts.scheme and len(parts.scheme) > 1 and parts.scheme.split("+")[0] not in MLFLOW_SCHEMES:
        return f"unknown scheme {parts.scheme!r}; MLflow reads {', '.join(MLFLOW_SCHEMES)} or a local path"
    if parts.scheme in ("http", "https") and not parts.hostname:
        return "names no host"
    if parts.scheme == "sqlite" and not parts.path.strip("/"):
        return "names no database file (e.g. sqlite:///mlflow.db)"
    return None


class MlflowSink(_Sink):
    """An MLflow tracking store: one run per model × suite × checkpoint, logged in batches."""

    kind: Literal["mlflow"]
    #: tracking URI; None = $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db (relative to the working directory)
    uri: str | None = None
    #: experiment name; None = the run's name (the nightly's name for its checkpoints)
    experiment: str | None = None
    #: run name; None = the model's name (and ``@<checkpoint>`` in the nightly)
    run_name: str | None = None
    #: seconds one request to a tracking server may take, and how often a failed one is tried again
    timeout_s: float = Field(20.0, gt=0, le=600)
    retries: int = Field(1, ge=0, le=10)

    @field_validator("uri")
    @classmethod
    def _uri(cls, v: str | None) -> str | None:
        if v is not None and (why := uri_problem(v)) is not None:
            raise ValueError(why)
        return v


class WandbSink(_Sink):
    """Weights & Biases: one run per model, the summary as a table, a sample table, the report as an artifact."""

    kind: Literal["wandb"]
    project: str = Field("evalcore", min_length=1)
    entity: str | None = None
    #: None = W&B's own choice ($WANDB_MODE, else online); offline writes <dir>/wandb/ for `wandb sync`
    mode: Literal["online", "offline"] | None = None
    run_name: str | None = None
    #: where W&B writes its run directory; None = $WANDB_DIR, else the working directory
    dir: str | None = None
    #: per-item answers in the sample table, at most (the first in the per-item table's order; W&B infers a type per
    #: cell, about a millisecond a row: every answer is in the artifact's per_item.parquet)
    max_samples: int = Field(1000, ge=0)
    #: seconds W&B may take to start a run before the sink gives up
    timeout_s: float = Field(90.0, gt=0, le=600)


class LmEvalSink(_Sink):
    """lm-evaluation-harness's result files, so scripts that parse them read evalcore's."""

    kind: Literal["lm_eval"]
    #: directory (local or s3://) of ``<model>/results_*.json``; None = <run root>/lm_eval
    out: str | None = None


Sink = Annotated[Union[MlflowSink, WandbSink, LmEvalSink], Field(discriminator="kind")]
KINDS = ("mlflow", "wandb", "lm_eval")


def _known_kinds(v: object) -> object:
    """An unknown or missing ``kind`` said in the project's words (pydantic's says "Input tag … found using")."""
    for i, s in enumerate(v if isinstance(v, list) else []):
        if isinstance(s, dict) and s.get("kind") not in KINDS:
            raise ValueError(f"item {i}: {'unknown sink ' + repr(s['kind']) if 'kind' in s else 'no kind'}; "
                             f"known: {', '.join(KINDS)}")
    return v


#: the ``tracking:`` field of a run or nightly config
Sinks = Annotated[list[Sink], BeforeValidator(_known_kinds)]
#: the field ``--track KIND=VALUE`` sets
MAIN_FIELD = {"mlflow": "uri", "wandb": "project", "lm_eval": "out"}


def from_flag(flag: str) -> dict:
    """A sink (as a mapping) from a ``--track`` flag: ``mlflow``, ``mlflow=sqlite:///x.db``, ``wandb=project``,
    ``lm_eval=DIR``; raises ValueError naming what is wrong."""
    kind, _, value = flag.partition("=")
    kind = kind.strip()
    if kind not in KINDS:
        raise ValueError(f"unknown sink {kind!r}; known: {', '.join(KINDS)} (e.g. --track mlflow=sqlite:///mlflow.db)")
    return {"kind": kind, **({MAIN_FIELD[kind]: value} if value else {})}


def with_flags(sinks: list[dict], flags: list[str]) -> list[dict]:
    """The config's sinks (mappings) with those of ``--track`` flags: a flag replaces a sink of its kind."""
    given = [from_flag(f) for f in flags]
    kinds = {g["kind"] for g in given}
    return [s for s in sinks if s.get("kind") not in kinds] + given


class TrackFlagError(ValueError):
    """A ``--track`` flag that names no sink or sets a field wrongly; the message says which."""


def with_track_flags(cfg, flags: list[str] | None):
    """``cfg`` (a run or nightly config) with the sinks of ``--track`` flags added (a flag replaces the config's
    sink of its kind); raises :class:`TrackFlagError`."""
    if not flags:
        return cfg
    from pydantic import TypeAdapter, ValidationError

    try:
        data = with_flags([s.model_dump() for s in cfg.tracking], flags)
        sinks = TypeAdapter(list[Sink]).validate_python(data)
    except ValidationError as e:
        err = e.errors()[0]
        raise TrackFlagError(f"--track: {'.'.join(str(p) for p in err['loc'][1:])}: "
                             f"{err['msg'].removeprefix('Value error, ')}") from None
    except ValueError as e:
        raise TrackFlagError(f"--track: {e}") from None
    return cfg.model_copy(update={"tracking": sinks})
