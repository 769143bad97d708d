"""The params both checkpoint backends of audio LMs share (``hf_audio_lm``, ``vllm_audio_lm``), and how they are
checked: one model, :class:`AudioLMParams`, whose fields mean the same on either engine; each backend's params
subclass it with only what that engine adds (``HFAudioParams``: device, attention; ``VLLMAudioParams``: the
engine's settings) and the families and sampling settings it accepts. A mistake names its field in one line
(``<kind> params.dtype: …``: :func:`validated`)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evalcore.params import ParamsError, check_params


class AudioLMParams(BaseModel):
    """The ``params`` shared by the checkpoint backends; a subclass sets ``families`` (the families that engine
    runs, by name) and ``families_said`` (how the message of an unknown family introduces them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    families: ClassVar[Mapping[str, Any]] = {}
    families_said: ClassVar[str] = "known"

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
