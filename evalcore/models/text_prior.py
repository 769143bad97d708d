"""The text-only prior baseline: answers from the prompt alone, never from the audio.

Whatever it is played, it gives the same answer to the same question, so any
score it gets measures what the questions leak, not listening.
"""

from __future__ import annotations

from typing import Any, Sequence

from evalcore.models.base import MODELS, AudioPrompt, MusicLM
from evalcore.models.dsp_listener import parse_options
from evalcore.params import Rate, Seconds

INSTRUMENT_ANSWER = "It sounds like guitar and drums."
MCQ_ANSWER = "The correct answer is (A)."
DESCRIPTION = "An upbeat pop song in a major key at a moderate tempo, with guitar, drums and vocals."


@MODELS.register("text_prior")
class TextPrior(MusicLM):
    """A fixed prior answer per question type; ignores the audio entirely."""

    def __init__(self, sample_rate: Rate = 16_000, max_audio_seconds: Seconds | None = None) -> None:
        self.sample_rate = sample_rate
        self.max_audio_seconds = max_audio_seconds

    def info(self) -> dict[str, Any]:
        return {**super().info(), "checkpoint": "text-prior-v1"}

    @staticmethod
    def answer(prompt: str) -> str:
        """The prior answer to ``prompt``."""
        if parse_options(prompt):
            return MCQ_ANSWER
        if "instrument" in prompt.lower():
            return INSTRUMENT_ANSWER
        return DESCRIPTION

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str]:
        return [self.answer(inp.prompt) for inp in batch]
