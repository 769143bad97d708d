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


@dataclass(frozen=True)
class AudioPrompt:
    """One model input: mono float32 audio at ``sample_rate`` (None = text only) and a prompt."""

    audio: np.ndarray | None
    sample_rate: int
    prompt: str


class MusicLM(ABC):
    """Base class of Music LM backends; subclasses register with ``MODELS``."""

    #: sample rate (Hz) the model consumes; audio is resampled to it
    sample_rate: int = 16_000
    #: longest audio window in seconds; longer audio is chunked (None = no limit)
    max_audio_seconds: float | None = None

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
        """One answer text per input, in order."""
