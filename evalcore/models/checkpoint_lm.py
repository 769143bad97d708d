"""What the checkpoint backends of audio LMs (``hf_audio_lm``, ``vllm_audio_lm``) do alike before their engines
differ: one params model, :class:`AudioLMParams`, whose fields mean the same on either engine (each backend's
params subclass it with only what that engine adds, and the families it runs); the one-line field errors
(``<kind> params.dtype: …``: :func:`validated`); the audio spec a checkpoint's processor config gives and the params
may narrow (:func:`checkpoint_audio_spec`, :func:`window`); and :class:`CheckpointLM`, which opens a checkpoint
(resolved, its family and audio window read) for the engine to load."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalcore.models.base import MusicLM
from evalcore.models.checkpoint import read_checkpoint_json, resolve_checkpoint
from evalcore.core.params import ParamsError, check_params


class AudioLMParams(BaseModel):
    """The ``params`` shared by the checkpoint backends; a subclass sets ``families`` (the families that engine
    runs, by name, each with its config.json ``model_types``), ``families_said`` (how the message of an unknown
    family introduces them) and ``unsupported`` (the message of a checkpoint of no family it runs)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: ClassVar[Mapping[str, Any]] = {}
    families_said: ClassVar[str] = "known"
    unsupported: ClassVar[str] = "checkpoint model_type {model_type!r} is not a supported family; supported: {types}"

    checkpoint: str = Field(min_length=1)  # local directory or s3:// prefix
    family: str | None = None  # None: from config.json model_type
    revision: str | None = None  # recorded instead of the content hash when given
    cache_dir: str | None = None  # local copies of s3:// checkpoints
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    max_new_tokens: int = Field(256, ge=1)
    generation: dict[str, Any] = Field(default_factory=dict)  # the engine's sampling settings (greedy by default)
    seed: int = 0  # the engine's seed (matters only when sampling)
    system_prompt: str | None = None
    sample_rate: int | None = Field(None, gt=0)  # must equal the feature extractor's when given
    max_audio_seconds: float | None = Field(None, gt=0)  # at most the model's window when given

    @field_validator("family")
    @classmethod
    def _known_family(cls, v: str | None) -> str | None:
        if v is not None and v not in cls.families:
            raise ValueError(f"unknown family {v!r}; {cls.families_said}: {', '.join(cls.families)}")
        return v

    def family_for(self, model_type: str | None) -> Any:
        """The family named in ``family``, else the one whose ``model_types`` hold config.json's ``model_type``."""
        if self.family is not None:
            return self.families[self.family]
        for f in self.families.values():
            if model_type in f.model_types:
                return f
        types = ", ".join(t for f in self.families.values() for t in f.model_types)
        raise ValueError(self.unsupported.format(model_type=model_type, types=types))


def validated(cls: type, kind: str, params: dict[str, Any]) -> Any:
    """``cls.Params`` validated from ``params``; a mistake raises ``ValueError`` naming the field
    (``<kind> params.dtype: ...``)."""
    try:
        check_params(cls, params)
    except ParamsError as e:
        raise ValueError("; ".join(f"{kind} params.{f}: {m}" for f, m in e.problems)) from None
    return cls.Params.model_validate(params)


def window(kind: str, p: AudioLMParams, spec: tuple[int, float | None]) -> tuple[int, float | None]:
    """(rate, window) of a checkpoint's ``spec`` as the params ``p`` (``sample_rate``, ``max_audio_seconds``) may
    narrow it: the rate must equal the checkpoint's, the window may only shorten."""
    sr, win = spec
    if p.sample_rate is not None and p.sample_rate != sr:
        raise ValueError(f"{kind} params.sample_rate: {p.sample_rate} differs from the checkpoint's "
                         f"feature extractor rate {sr}; leave it out")
    if p.max_audio_seconds is not None:
        if win is not None and p.max_audio_seconds > win:
            raise ValueError(f"{kind} params.max_audio_seconds: {p.max_audio_seconds} is longer than the "
                             f"model's window {win} s")
        win = p.max_audio_seconds
    return sr, win


def processor_audio_spec(processor_config: dict | None, preprocessor_config: dict | None) -> tuple[int, float | None]:
    """(feature extractor rate, longest window) from ``processor_config.json`` (transformers 5 keeps the
    feature extractor inside it) or the older ``preprocessor_config.json``."""
    proc = processor_config or {}
    fe = proc.get("feature_extractor") or preprocessor_config or {}
    if "sampling_rate" not in fe:
        raise ValueError("hf_audio_lm: the checkpoint's processor has no feature extractor sampling_rate "
                         "(processor_config.json / preprocessor_config.json)")
    sr = int(fe["sampling_rate"])
    if proc.get("max_audio_len"):
        return sr, float(proc["max_audio_len"])
    if fe.get("chunk_length"):
        return sr, float(fe["chunk_length"])
    if fe.get("n_samples"):
        return sr, float(fe["n_samples"]) / sr
    return sr, None


def checkpoint_audio_spec(checkpoint: str) -> tuple[int, float | None]:
    """:func:`processor_audio_spec` of a checkpoint (a local directory or ``s3://`` prefix), its weights unread."""
    return processor_audio_spec(read_checkpoint_json(checkpoint, "processor_config.json"),
                                read_checkpoint_json(checkpoint, "preprocessor_config.json"))


class CheckpointLM(MusicLM):
    """A :class:`~evalcore.models.base.MusicLM` loaded from a checkpoint with :class:`AudioLMParams` (its ``Params``):
    the params checked under the registered name, the audio spec read without loading the model."""

    Params: ClassVar[type[AudioLMParams]]
    path_params = {"checkpoint": "dir"}

    @classmethod
    def audio_spec(cls, params: dict[str, Any]) -> tuple[int, float | None]:
        p = validated(cls, cls.name, params)  # type: ignore[attr-defined]  # set by the registration
        return window(cls.name, p, checkpoint_audio_spec(p.checkpoint))  # type: ignore[attr-defined]

    def open_checkpoint(self, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Set ``params`` (validated), ``ckpt`` (resolved: an ``s3://`` prefix copied), ``family``, ``sample_rate``
        and ``max_audio_seconds``; the checkpoint's local directory and its config.json back."""
        kind = type(self).name  # type: ignore[attr-defined]  # set by the registration
        p = self.params = validated(type(self), kind, params)
        self.ckpt = resolve_checkpoint(p.checkpoint, p.revision, p.cache_dir)
        local = self.ckpt.local_dir
        config = read_checkpoint_json(local, "config.json") or {}
        self.family = p.family_for(config.get("model_type"))
        self.sample_rate, self.max_audio_seconds = window(kind, p, checkpoint_audio_spec(local))
        return local, config
