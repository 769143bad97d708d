"""The Music LM interface every backend implements.

A Music LM takes a batch of (audio, sample rate, prompt) and returns one text per
input. It declares the sample rate it wants (the pipeline resamples to it), its
longest audio window (longer audio is chunked) and its generation settings.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from evalcore.core.registry import Registry


@dataclass(frozen=True)
class AudioPrompt:
    """One model input: mono float32 audio at ``sample_rate`` (None = text only) and a prompt.

    ``reference``: the request's reference answer, for reference-based systems only (the
    paraphrase skyline / adversarial rewrite); a Music LM backend must never read it.
    """

    audio: np.ndarray | None
    sample_rate: int
    prompt: str
    reference: str | None = None


class MusicLM(ABC):
    """Base class of Music LM backends; subclasses register with ``MODELS``."""

    #: sample rate (Hz) the model consumes; audio is resampled to it
    sample_rate: int = 16_000
    #: longest audio window in seconds; longer audio is chunked (None = no limit)
    max_audio_seconds: float | None = None
    #: False for a system that never reads the audio (e.g. ``reference_rewrite``): the driver reads this
    #: class attribute without building the model, and the decode stage then reads no audio at all —
    #: every request gets ``audio`` None, ``audio_seconds`` 0 and one chunk, so a missing or corrupt
    #: audio file is *not* an error for it, and conditions ``random`` / ``silence`` / ``noise`` behave
    #: like ``text_only``
    uses_audio: bool = True

    @classmethod
    def audio_spec(cls, params: dict[str, Any]) -> tuple[int, float | None]:
        """(sample rate, longest window in s) the driver prepares audio for, without building the model.

        Default: ``params`` ``sample_rate`` / ``max_audio_seconds``, else the class attributes. A backend
        whose rate and window live in its checkpoint overrides this with a cheap read of that checkpoint;
        the built model must then report the same values (the model actor checks it)."""
        sr = int(params.get("sample_rate", cls.sample_rate))
        window = params.get("max_audio_seconds", cls.max_audio_seconds)
        return sr, (float(window) if window is not None else None)

    def generation_settings(self) -> dict[str, Any]:
        """Generation parameters, recorded with every response."""
        return {}

    def info(self) -> dict[str, Any]:
        """Identity of the model (backend, checkpoint, settings), recorded with every response."""
        return {
            "backend": type(self).__name__,
            "checkpoint": None,
            "sample_rate": self.sample_rate,
            "max_audio_seconds": self.max_audio_seconds,
            "generation": self.generation_settings(),
        }

    @abstractmethod
    def generate(self, batch: Sequence[AudioPrompt]) -> list[str]:
        """One answer text per input, in order (an exception instance in place of the text of an
        input that failed makes that row an error row with the reason; the other rows are kept)."""


#: the backends by kind: ``@MODELS.register("kind")`` on a :class:`MusicLM`; loads this package's modules on first use
MODELS: Registry[MusicLM] = Registry("model", __package__ or "evalcore.models")
