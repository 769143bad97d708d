"""The null model: an empty answer for every input, at once (measures pipeline overhead)."""

from __future__ import annotations

from typing import Sequence

from evalcore.models.base import MODELS, AudioPrompt, MusicLM
from evalcore.core.params import Rate, Seconds


@MODELS.register("null")
class NullModel(MusicLM):
    """Returns "" for each input without looking at it."""

    def __init__(self, sample_rate: Rate = 16_000, max_audio_seconds: Seconds | None = None) -> None:
        self.sample_rate = sample_rate
        self.max_audio_seconds = max_audio_seconds

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str]:
        return ["" for _ in batch]
