"""The run config: YAML → validated pydantic models.

A mistake fails fast with :class:`ConfigError`, whose message names each bad field
by its path (``models.0.resources.batch_size: ...``).
"""

from __future__ import annotations

import dataclasses
import string
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import yaml
from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, ValidationError, ValidationInfo,
                      field_validator, model_validator)

from evalcore.core import storage
from evalcore.datasets.base import DATASETS
from evalcore.core.embedders import EmbedderSpec
from evalcore.judges.base import JUDGES
from evalcore.models.base import MODELS
from evalcore.core.params import ParamsError, check_params, did_you_mean, value_reason
from evalcore.core.registry import Registry
from evalcore.kinds.base import KINDS, config_mistake
from evalcore.kinds.base import ProtocolKind as ProtocolKindSpec
from evalcore.conditions.base import condition
from evalcore.textmetrics.metric_config import FreeformMetrics
from evalcore.core.tracking_config import Sinks
from evalcore.vocab.lexicon import LEXICONS


def _known_condition(name: str) -> str:
    condition(name)  # a ValueError names the condition and the forms known
    return name


#: a condition's name as a protocol writes it (evalcore.conditions), checked against the registry
ConditionName = Annotated[str, AfterValidator(_known_condition)]

#: the chunk length of the factual-QA paper's chunked models (§4.2): ``chunk_seconds: 60``
CHUNK_SECONDS_PAPER = 60.0

#: a published table, ``paper/table`` as in configs/paper/published.csv (``factual/table8``, ``muchomusic/text``)
TableKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9-]+/(table\d+|text|results)$")]

#: placeholders a prompt template may use
PROMPT_FIELDS = {"question", "options", "letters", "vocabulary"}


def _registered(reg: Registry[Any], kind: str) -> str:
    """``kind`` if it is registered in ``reg`` (the registry loads its package's modules on first use)."""
    if kind not in reg:
        raise ValueError(f"unknown {reg.kind} kind {kind!r}; known: {', '.join(reg.names())}")
    return kind


def _params_fit(reg: Registry[Any]):
    """A validator of ``params`` against the schema the registered ``kind`` declares (evalcore.core.params)."""

    def check(cls: type, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        kind = info.data.get("kind")  # absent when the kind itself was wrong: that error is reported
        if kind is not None:
            check_params(reg.get(kind), v)
        return v

    return field_validator("params")(classmethod(check))


class ConfigError(ValueError):
    """An invalid run config; the message names the offending fields."""


class Strict(BaseModel):
    """A config section: an unknown field is a mistake, and a validated section is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


_Strict = Strict  # the name this module's sections use


#: restarts of a dead actor by default: a node lost three times in one run still finishes it (docs/cluster.md)
RESTARTS = 3


class Resources(_Strict):
    """Ray resources of one model's actor pool."""

    num_gpus: float = Field(0.0, ge=0)
    num_cpus: float = Field(1.0, gt=0)
    concurrency: int = Field(1, ge=1)
    batch_size: int = Field(8, ge=1)
    #: restarts of a dead actor (its node lost, its process killed), each retrying the batches it held, on any node
    #: with room; one more death ends the run (exit 1, ``--resume`` finishes it). -1: without end; 0: the first death
    #: ends the run
    max_restarts: int = Field(RESTARTS, ge=-1)
    #: custom Ray resources each actor holds, e.g. {sim_gpu: 1} for a simulated GPU (evalcore.models.simulated)
    custom: dict[str, float] = Field(default_factory=dict)

    @field_validator("custom")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        bad = sorted(k for k, x in v.items() if not x > 0)
        if bad:
            raise ValueError(f"amounts must be > 0, not for {', '.join(bad)}")
        return v


class DatasetConfig(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)

    _known = field_validator("kind")(classmethod(lambda cls, v: _registered(DATASETS, v)))
    _fits = _params_fit(DATASETS)


class ModelSpec(_Strict):
    """A model without its name: its registered kind, params, resources and audio handling. A run's model
    (:class:`ModelConfig`) is one with a name; a nightly series' model template is one whose checkpoint param
    is filled in per checkpoint (:class:`evalcore.nightly.config.ModelTemplate`)."""

    kind: str
    params: dict[str, Any] = Field(default_factory=dict)
    resources: Resources = Field(default_factory=Resources)
    #: audio longer than the model's window: "chunk" into windows or "truncate" to the first
    long_audio: Literal["chunk", "truncate"] = "chunk"
    #: cut audio into chunks of this many seconds (at most the model's window) and unite their labels;
    #: CHUNK_SECONDS_PAPER (60) is the chunked-model setting of the factual-QA paper. None = the model's window
    chunk_seconds: float | None = Field(None, gt=0)
    #: a Ray runtime_env for this model's actors only (pip / conda / container / working_dir / py_executable),
    #: for research models whose pins conflict with the driver's; see docs/models.md
    runtime_env: dict[str, Any] | None = None

    _known = field_validator("kind")(classmethod(lambda cls, v: _registered(MODELS, v)))


class ModelConfig(ModelSpec):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    #: the model whose answers this entry gives, where several entries are one model — a replay of one model's
    #: outputs per benchmark, a stand-in per benchmark: the model card shows them as one column of this name (two
    #: entries of one model must not answer the same protocol). None: the entry's name (left out of config.yaml)
    model: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]+$", exclude_if=lambda v: v is None)

    _fits = _params_fit(MODELS)

    @model_validator(mode="after")
    def _fits_resources(self) -> "ModelConfig":
        """A backend's params that depend on its resources (``check_resources``: vllm_audio_lm's tensor
        parallelism against ``num_gpus``)."""
        hook = getattr(MODELS.get(self.kind), "check_resources", None)
        if callable(hook):
            hook(self.params, self.resources.num_gpus)
        return self


class JudgeConfig(_Strict):
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)

    _known = field_validator("kind")(classmethod(lambda cls, v: _registered(JUDGES, v)))
    _fits = _params_fit(JUDGES)

    @model_validator(mode="after")
    def _params_agree(self) -> "JudgeConfig":
        """A judge's params that exclude one another (``check_params``: MMAU-Pro's ``embedder`` and ``similarity``)."""
        hook = getattr(JUDGES.get(self.kind), "check_params", None)
        if callable(hook):
            hook(self.params)
        return self


class ProtocolConfig(_Strict):
    """One protocol instance: its own ``name`` (the key of its requests, tables and report sections) and its
    ``kind``. A run may hold several instances of one kind (e.g. ``muchomusic`` and ``hummusqa``, both
    ``mcq``); ``kind`` may be left out when the name is a kind (``name: factual``)."""

    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    kind: str  #: a registered protocol kind (evalcore.kinds)
    #: audio conditions (evalcore.conditions): correct, random, silence, noise, text_only, or a segment of the clip
    #: (first_<percent>, middle_<percent>, last_<percent>, window_<seconds>s)
    conditions: list[ConditionName] = Field(default_factory=lambda: ["correct", "random"], min_length=1)
    #: prompt variants: name → template using {question}, {options}, {letters}, {vocabulary};
    #: None = the kind's default (evalcore.kinds: ProtocolKind.variants)
    variants: dict[str, str] | None = Field(None, min_length=1)
    #: None = the kind's default judge, fitted to the tasks of the protocol's datasets
    #: (evalcore.runconfig.vocab_fit.default_judge)
    judge: JudgeConfig | None = None
    #: a second judge applied to the same responses after the run; its agreement with ``judge`` goes into
    #: tables/agreement.parquet and the summary (evalcore.scoring.agreement)
    agreement_judge: JudgeConfig | None = None
    #: number of seeded option orders per multiple-choice question
    option_orders: int = Field(1, ge=1, le=24)
    #: dataset names to run on (None = every dataset)
    datasets: list[str] | None = None
    #: model names to ask (None = every model), e.g. keep reference-rewrite systems to free-form QA
    models: list[str] | None = None
    #: labels for the {vocabulary} placeholder: a lexicon name (evalcore.vocab.lexicon.LEXICONS) or a list
    vocabulary: str | list[str] | None = None
    #: multiple choice: named prompt template set(s) (evalcore.protocols.templates), one for every model or
    #: model name → set ("default" for the rest); the set's name is the prompt variant. Not with ``variants``.
    #: The names are checked by the preflight (evalcore.runconfig.preflight.template_problems)
    templates: str | dict[str, str] | None = None
    #: multiple choice: in-context examples (0–5) before each question; a list is a sweep, one prompt
    #: variant per count ("<variant>-icl<k>", e.g. MuChoMusic's 0–5 shots in one run)
    icl_examples: int | list[int] = 0
    #: where in-context examples come from: "dataset" (drawn seeded from the dataset's other questions) or
    #: "released" (MuChoMusic's rule, templates muchomusic: one fixed list for every question, the released
    #: example first, then the dataset's questions in one seeded order; k shots = its first k)
    icl_pool: Literal["dataset", "released"] = "dataset"
    #: report only: leave breakdown values holding at most this share of the questions out of the category
    #: breakdown (HumMusQA's Figure 1 leaves out categories with <= 5 % of the questions: 0.05)
    breakdown_min_share: float = Field(0.0, ge=0.0, lt=1.0)
    #: free-form only: metric profile, registered metric names and their settings (evalcore.textmetrics.metric_config;
    #: None = FreeformMetrics(): mullama lexical metrics)
    metrics: FreeformMetrics | None = None
    #: mir only: the text embedder of the rules that score by similarity (CMI-Bench's tagging, released with
    #: GTE-Qwen2-7B-instruct): ``{kind: sentence_transformers | transformers_mean, path: <local model folder>}``
    #: (evalcore.core.embedders); None = the bag-of-words stand-in, named as such in the definitions and on the card
    #: (left out of config.yaml when unset: a config without it dumps, and fingerprints, as before it existed)
    similarity: EmbedderSpec | None = Field(None, exclude_if=lambda v: v is None)
    _kind_spec: type[ProtocolKindSpec] | None = PrivateAttr(None)

    @model_validator(mode="before")
    @classmethod
    def _kind_from_name(cls, data: Any) -> Any:
        """A protocol named after a kind (``name: mcq``) is of that kind; other names need ``kind``."""
        if isinstance(data, dict) and data.get("kind") is None and data.get("name") in KINDS:
            data = {**data, "kind": data["name"]}
        return data

    _known = field_validator("kind")(classmethod(lambda cls, v: _registered(KINDS, v)))

    @field_validator("icl_examples")
    @classmethod
    def _icl_counts(cls, v: int | list[int]) -> int | list[int]:
        counts = v if isinstance(v, list) else [v]
        if not counts or any(not 0 <= k <= 5 for k in counts):
            raise ValueError("in-context example counts must be between 0 and 5")
        if len(set(counts)) != len(counts):
            raise ValueError("in-context example counts must not repeat")
        return v

    def icl_counts(self) -> list[int]:
        """The in-context example counts of this protocol (one, or the sweep)."""
        return list(self.icl_examples) if isinstance(self.icl_examples, list) else [self.icl_examples]

    def icl_variant(self, base: str, k: int) -> str:
        """The prompt variant of ``base`` with ``k`` examples: ``base`` itself unless the counts are a sweep."""
        return f"{base}-icl{k}" if isinstance(self.icl_examples, list) else base

    @field_validator("vocabulary")
    @classmethod
    def _vocabulary(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, str):
            if v not in LEXICONS:
                raise ValueError(f"unknown vocabulary {v!r}; known: {', '.join(sorted(LEXICONS))} (or give a list)")
        return v

    @field_validator("variants")
    @classmethod
    def _templates(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        for name, template in (v or {}).items():
            try:
                used = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
            except ValueError as e:
                raise ValueError(f"variant {name!r}: bad template: {e}") from None
            unknown = used - PROMPT_FIELDS
            if unknown:
                raise ValueError(
                    f"variant {name!r} uses unknown placeholder(s) {sorted(unknown)}; "
                    f"allowed: {sorted(PROMPT_FIELDS)}"
                )
        return v

    @model_validator(mode="after")
    def _conditions_unique(self) -> "ProtocolConfig":
        if "correct" not in self.conditions:
            raise ValueError("conditions must include 'correct' (the other conditions are compared to it)")
        if len(set(self.conditions)) != len(self.conditions):
            raise ValueError("conditions must not repeat")
        if self.templates is not None and self.variants is not None:
            raise ValueError("give either variants or templates, not both")
        if (mistake := config_mistake(self.kind, {f: getattr(self, f) for f in type(self).model_fields})) is not None:
            raise ValueError(mistake)
        self._kind_spec = KINDS.get(self.kind)
        if self.icl_pool == "released" and self.templates != "muchomusic":
            raise ValueError("icl_pool 'released' is MuChoMusic's released example and rule: templates muchomusic")
        return self

    @property
    def kind_spec(self) -> type[ProtocolKindSpec]:
        """What this protocol's kind is (:mod:`evalcore.kinds`). The class travels with the config (a Ray worker
        that unpickles it imports the kind's module, so a kind registered outside the package's own modules, a toy
        imported by its test, is known there too)."""
        return self._kind_spec or KINDS.get(self.kind)

    def freeform_metrics(self) -> FreeformMetrics:
        """The free-form metrics configured, or the default."""
        return self.metrics or FreeformMetrics()


class S3Config(_Strict):
    #: an S3-compatible server's address (``http://127.0.0.1:8333``); None: ``$AWS_ENDPOINT_URL_S3``, else
    #: ``$AWS_ENDPOINT_URL`` (boto3's own order), else AWS
    endpoint_override: str | None = None
    #: None: ``$AWS_REGION``, else ``$AWS_DEFAULT_REGION``
    region: str | None = None
    scheme: Literal["http", "https"] | None = None


class StorageConfig(_Strict):
    #: where the run writes: a local path or s3://bucket/prefix (default ./runs/<name>)
    root: str | None = None
    s3: S3Config = Field(default_factory=S3Config)
    #: audio may only be read from under these roots (local paths or s3://bucket/prefix); an item whose
    #: audio lies elsewhere becomes an error row "not_allowed". None = no restriction.
    allowed_audio_roots: list[str] | None = None
    #: seconds one read of an input (audio file, items file) may take; past it the request is an error row of
    #: class transient (``decode/timeout``) and the run goes on. S3 requests also stop after this long without progress
    read_timeout_s: float = Field(300.0, gt=0, le=86_400)

    #: local paths mounted at the same place on every node of a Ray cluster (NFS, EFS, a volume every pod mounts):
    #: on a cluster of several nodes, audio, checkpoints and LLM caches must lie on ``s3://`` or under one of these
    #: (docs/cluster.md); None: no path is shared (a single machine needs none)
    shared_paths: list[str] | None = None

    def settings(self) -> storage.StorageSettings:
        """How the run reaches storage (``with storage.using(cfg.storage.settings()):``; never keys). An endpoint or
        region the config leaves out comes from the environment, as boto3 takes them (:meth:`S3Options.from_env`)."""
        env = storage.S3Options.from_env()
        given = self.s3.model_dump()
        return storage.StorageSettings(storage.S3Options(
            endpoint_override=given["endpoint_override"] or env.endpoint_override,
            region=given["region"] or env.region, scheme=given["scheme"]), self.read_timeout_s)

    def s3_options(self) -> dict[str, Any]:
        """The S3 options of :meth:`settings` as a Ray stage receives them (``storage.StorageSettings.of(s3)``): a
        worker's own environment is not the driver's, so the endpoint taken from the driver's goes with them."""
        return dataclasses.asdict(self.settings().s3)


class Seeds(_Strict):
    """Seeds of every random choice, so a run is reproducible."""

    derangement: int = 0  # random-audio pairing
    noise: int = 0  # Gaussian-noise condition
    options: int = 0  # option shuffles
    icl: int = 0  # in-context example draws
    bootstrap: int = 0  # confidence intervals


class Stats(_Strict):
    bootstrap_resamples: int = Field(1000, ge=100, le=100_000)
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    #: the fewest paired items a difference correct − control needs to decide a listening verdict (fewer:
    #: shown as "too few items", never "CI > 0"); see docs/report.md
    min_items: int = Field(20, ge=1, le=1_000_000)


class RayConfig(_Strict):
    address: str | None = None  # None: $RAY_ADDRESS, else a local Ray
    progress_bars: bool = True
    #: CPUs reserved per decode task (fractional values oversubscribe small machines)
    decode_num_cpus: float = Field(1.0, gt=0)
    #: scoring actors (free-form lexical metrics in the stream) at most, for runs of 10,000 requests or more (shorter
    #: runs score in tasks); Ray Data adds actors as batches queue
    score_actors: int = Field(2, ge=1)
    #: restarts of a dead scoring or metric actor (its node lost), each retrying the batches it held; one more death
    #: ends the run (exit 1, --resume finishes it). Models have their own, ``resources.max_restarts``
    max_restarts: int = Field(RESTARTS, ge=-1)
    #: blocks (batches of requests, decoded audio, answers) that may wait between a stage and the next before the
    #: stage starts no more tasks (:mod:`evalcore.pipeline.backpressure`); every waiting block costs the driver memory
    max_queued_blocks: int = Field(256, ge=1)
    #: requests per aligned block at most for a model that reads audio (None: 1,024, fewer where its requests share
    #: few sounds: about 256 distinct sounds a block): a decode task's output reaches the model when the task ends;
    #: smaller blocks reach it sooner, at a decode task and a model task per block
    audio_block_requests: int | None = Field(None, ge=1)
    #: actors of the model-based free-form metrics (BERTScore, CLAPText) in the stream, each holding those
    #: metrics' models; each takes a GPU when a metric's ``device`` is cuda
    metric_actors: int = Field(1, ge=1)


#: the error budget (``max_error_rate``) of a run whose config sets none
DEFAULT_MAX_ERROR_RATE = 0.5


class CaptionsConfig(_Strict):
    """Where the ``caption`` condition's descriptions come from when an item has no ``caption`` field: the answers
    one model gave in an earlier run (a free-form protocol asking it to describe the music), matched to this run's
    items by recording (audio URI and excerpt)."""

    run: str = Field(min_length=1)  #: the earlier run's root (local or s3://)
    model: str = Field(min_length=1)  #: whose answers describe the clips
    #: the free-form protocol instance of that run whose answers they are (default: its only free-form instance)
    protocol: str | None = Field(None, min_length=1)
    #: the prompt variant (default: the first of that protocol's answers)
    variant: str | None = Field(None, min_length=1)


class ParaphraserConfig(_Strict):
    """The LLM that paraphrases each multiple-choice question and its options for the ``paraphrase_<j>`` conditions
    (:mod:`evalcore.pipeline.paraphrases`): an OpenAI-compatible endpoint's params, as an LLM judge's
    (:class:`evalcore.llm.runner.LLMRunner`: ``base_url``, ``model``, ``rpm``, ``tpm``, ``api_key_env``,
    ``cache_root``, ``seed``, ``temperature`` …; the cache defaults to the run's root)."""

    params: dict[str, Any]

    @field_validator("params")
    @classmethod
    def _endpoint(cls, v: dict[str, Any]) -> dict[str, Any]:
        from evalcore.llm.runner import LLMRunner  # heavy: imports openai (0.3 s), only with a paraphraser

        try:
            LLMRunner(**v)
        except (TypeError, ValueError) as e:
            raise ValueError(f"not an LLM endpoint's params: {str(e).splitlines()[0][:200]}") from None
        return v


class SuiteConfig(_Strict):
    """A named suite: what models are evaluated on and how (datasets, protocols, seeds, stats, error budget),
    where it writes and on which Ray. A run config is a suite plus its models (:class:`RunConfig`); a nightly
    config is a suite plus checkpoint series (:class:`evalcore.nightly.config.NightlyConfig`), whose every
    checkpoint runs as a run config with the same suite."""

    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$")
    datasets: list[DatasetConfig] = Field(min_length=1)
    protocols: list[ProtocolConfig] = Field(min_length=1)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    seeds: Seeds = Field(default_factory=Seeds)
    stats: Stats = Field(default_factory=Stats)
    ray: RayConfig = Field(default_factory=RayConfig)
    #: the error budget: the largest errored share the run accepts (its rule, what shares of what:
    #: evalcore.pipeline.outcome.BUDGET_SCOPES; ``evalcore validate`` says it); null = no budget
    max_error_rate: float | None = Field(DEFAULT_MAX_ERROR_RATE, ge=0.0, le=1.0)
    #: where results are also sent once written: MLflow, Weights & Biases, lm-eval's files
    #: (evalcore.core.tracking_config; a failing sink is a warning, never a failed run)
    tracking: Sinks = Field(default_factory=list)
    #: the caption condition's descriptions from an earlier run (None: the items' own ``caption`` fields only)
    captions: CaptionsConfig | None = None
    #: the LLM that paraphrases questions and options for the ``paraphrase_<j>`` conditions (None: none)
    paraphraser: ParaphraserConfig | None = None

    @model_validator(mode="after")
    def _paraphrases(self) -> Self:
        """A paraphrase condition asks a kind with shuffled options (multiple choice), and needs the paraphraser."""
        for i, p in enumerate(self.protocols):
            asked = [c for c in p.conditions if condition(c).paraphrase is not None]
            if asked and p.kind_spec.options != "shuffled":
                raise ValueError(f"protocols.{i}.conditions: {asked[0]} paraphrases a question and its options, for "
                                 f"a kind whose options are shuffled (multiple choice), not {p.kind!r}")
            if asked and self.paraphraser is None:
                raise ValueError(f"paraphraser: protocols.{i} asks {asked[0]}: give the LLM that paraphrases "
                                 "(paraphraser: {params: {base_url: …, model: …, rpm: …, tpm: …}})")
        return self

    @property
    def root(self) -> str:
        return self.storage.root or str(Path("runs") / self.name)

    def with_root(self, root: str | None) -> Self:
        """This config with ``storage.root`` set to ``root`` (``--out``) when given."""
        return self.model_copy(update={"storage": self.storage.model_copy(update={"root": root})}) if root else self


class ModelCard(_Strict):
    """The report's model-card table: one row per benchmark/task, one column per model, each cell the value [CI]
    with its listening mark (evalcore.reports.model_card)."""

    #: a CSV of published values (dataset, model, metric, value, source) set beside the run's
    published: str | None = Field(None, min_length=1)


class RunConfig(SuiteConfig):
    models: list[ModelConfig] = Field(min_length=1)
    #: the report's model-card table (None: no card)
    model_card: ModelCard | None = None
    #: the published tables this run reproduces (``paper/table``, e.g. ``factual/table8``; one, or a list): the report
    #: and ``tables/reproduction.parquet`` put each of their published cells beside the run's value, and the paper's
    #: numbers in the prose (``paper/text``) where the run computes the same quantity
    reproduces: list[TableKey] | None = Field(None, min_length=1)
    #: the published-values file (default: configs/paper/published.csv of this evalcore)
    published_values: str | None = Field(None, min_length=1)

    @field_validator("reproduces", mode="before")
    @classmethod
    def _one_or_more(cls, v: Any) -> Any:
        """One table (``factual/table2``) or a list of them; the same table twice is a mistake."""
        v = [v] if isinstance(v, str) else v
        if isinstance(v, list) and len(set(map(str, v))) != len(v):
            raise ValueError(f"a table named twice: {v}")
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> "RunConfig":
        for what, names in (("datasets", [d.name for d in self.datasets]), ("models", [m.name for m in self.models]),
                            ("protocols", [p.name for p in self.protocols])):
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"{what}: duplicate name(s) {dup}")
        known = {d.name for d in self.datasets}
        for i, p in enumerate(self.protocols):
            for d in p.datasets or []:
                if d not in known:
                    raise ValueError(f"protocols.{i}.datasets: unknown dataset {d!r}")
            for name in p.models or []:
                if name not in {m.name for m in self.models}:
                    raise ValueError(f"protocols.{i}.models: unknown model {name!r}")
            unknown = sorted(set(p.templates if isinstance(p.templates, dict) else ())
                             - {m.name for m in self.models} - {"default"})
            if unknown:
                raise ValueError(f"protocols.{i}.templates: unknown model(s) {unknown}")
            asked = [m for m in self.models if p.models is None or m.name in p.models]
            column: dict[str, str] = {}
            for m in asked:  # two entries of one model on one protocol: two values for one card cell
                shown = m.model or m.name
                if shown in column:
                    where = next(j for j, x in enumerate(self.models) if x.name == m.name)
                    raise ValueError(f"models.{where}.model: {m.name!r} and {column[shown]!r} are both model {shown!r} "
                                     f"and both answer protocol {p.name!r}: one model answers a protocol once")
                column[shown] = m.name
        return self  # whether a vocabulary fits its tasks needs the datasets: evalcore.runconfig.preflight.vocabulary_problems


def _model_at(loc: tuple, root: type[BaseModel] | None = None) -> type[BaseModel] | None:
    """The config model whose field the error at ``loc`` is about (None when it is not a config model)."""
    model: Any = root or RunConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = next((a for a in _types_in(field.annotation) if issubclass(a, BaseModel)), None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def known_kinds(model: type[BaseModel] | None) -> list[str]:
    """The values a config section's ``kind`` may take: its Literal's, else its registry's names."""
    field = model.model_fields.get("kind") if model is not None else None
    if field is None:
        return []
    if typing.get_origin(field.annotation) is Literal:
        return [str(a) for a in typing.get_args(field.annotation)]
    sections: tuple[tuple[type, Registry[Any]], ...] = ((DatasetConfig, DATASETS), (ModelSpec, MODELS),
                                                        (JudgeConfig, JUDGES), (ProtocolConfig, KINDS))
    reg = next((r for cls, r in sections if issubclass(model, cls)), None)
    return [] if reg is None else list(reg.names())


def _types_in(annotation: Any) -> list[type]:
    """The classes named in a type annotation (``list[X] | None`` → [X, NoneType])."""
    args = typing.get_args(annotation)
    if not args:
        return [annotation] if isinstance(annotation, type) else []
    return [t for a in args for t in _types_in(a)]


def error_lines(e: ValidationError, root: type[BaseModel] | None = None) -> list[str]:
    """One ``<field path>: <reason>`` line per mistake; params mistakes name the param, unknown fields get a
    "did you mean" (``root``: the top-level config model, default :class:`RunConfig`)."""
    lines = []
    for err in e.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, ParamsError):
            lines += [f"{loc}.{f}: {m}" if f else f"{loc}: {m}" for f, m in cause.problems]
        elif err["type"] == "extra_forbidden" and (model := _model_at(err["loc"], root)) is not None:
            lines.append(f"{loc}: {did_you_mean(err['loc'][-1], model.model_fields)}")
        elif err["type"] == "missing" and err["loc"][-1] == "kind" and (
                kinds := known_kinds(_model_at(err["loc"], root))):
            lines.append(f"{loc}: required field missing; known kinds: {', '.join(kinds)}")
        else:
            lines.append(f"{loc}: {value_reason(err) or err['msg'].removeprefix('Value error, ')}")
    return lines


def _format_errors(e: ValidationError) -> str:
    return "invalid run config:\n" + "\n".join(f"  {line}" for line in error_lines(e))


def parse_config(data: Any) -> RunConfig:
    """Validate a config mapping; raises :class:`ConfigError` naming the bad fields."""
    if not isinstance(data, dict):
        raise ConfigError(f"invalid run config: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_errors(e)) from None


def read_yaml(path: str | Path, what: str = "config") -> Any:
    """The YAML document at ``path``; a missing file or invalid YAML is a :class:`ConfigError` naming it."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} file not found: {p}")
    try:
        with p.open(encoding="utf-8") as f:  # from the file: YAML's own message names it, not "<unicode string>"
            return yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigError(f"{what} file {p} is not valid YAML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} file {p} is not UTF-8 text ({e.reason})") from None


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run config file."""
    return parse_config(read_yaml(path))


def demo_config_path() -> Path:
    """The embedded demo's config, shipped inside the package."""
    return Path(__file__).resolve().parents[1] / "configs" / "demo.yaml"
