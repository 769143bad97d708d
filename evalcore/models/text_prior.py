"""The text-only prior baseline: answers from the prompt alone, never from the audio.

Whatever it is played, it gives the same answer to the same question, so any score it gets measures what the
questions leak, not listening. A multiple-choice answer names the first option in the form the benchmark's rule
reads: its letter (``The correct answer is (A).``; MuChoMusic's and RUL's letter rules, evalcore's ``mcq_string``)
or, where the prompt asks for the choice's text (the MMAU, MMAR and MMAU-Pro configs: "Answer with the text of the
correct choice"), that option's text alone — the published word-set rule never credits a letter, and an answer that
no rule reads would make the prior's row a constant 0 that shows nothing (``mcq_answer`` fixes the form).
"""

from __future__ import annotations

import re
from typing import Any, Literal, Sequence

from evalcore.models.base import MODELS, AudioPrompt, MusicLM
from evalcore.models.dsp_listener import parse_options
from evalcore.core.params import Rate, Seconds

INSTRUMENT_ANSWER = "It sounds like guitar and drums."
MCQ_ANSWER = "The correct answer is (A)."
DESCRIPTION = "An upbeat pop song in a major key at a moderate tempo, with guitar, drums and vocals."
#: a prompt that asks for the text of the chosen option, not its letter
ASKS_TEXT = re.compile(r"\btext of the (?:correct |right |chosen )?(?:choice|option|answer)\b", re.IGNORECASE)


@MODELS.register("text_prior")
class TextPrior(MusicLM):
    """A fixed prior answer per question type; ignores the audio entirely. ``mcq_answer``: ``auto`` (the first
    option's text where the prompt asks for the choice's text, else its letter), ``letter`` or ``text``."""

    def __init__(self, sample_rate: Rate = 16_000, max_audio_seconds: Seconds | None = None,
                 mcq_answer: Literal["auto", "letter", "text"] = "auto") -> None:
        self.sample_rate = sample_rate
        self.max_audio_seconds = max_audio_seconds
        self.mcq_answer = mcq_answer

    def info(self) -> dict[str, Any]:
        return {**super().info(), "checkpoint": "text-prior-v1", "mcq_answer": self.mcq_answer}

    @staticmethod
    def answer(prompt: str, mcq_answer: str = "auto") -> str:
        """The prior answer to ``prompt``."""
        options = parse_options(prompt)
        if options:
            text = mcq_answer == "text" or (mcq_answer == "auto" and ASKS_TEXT.search(prompt) is not None)
            return options[0][1] if text else MCQ_ANSWER
        if "instrument" in prompt.lower():
            return INSTRUMENT_ANSWER
        return DESCRIPTION

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str]:
        return [self.answer(inp.prompt, self.mcq_answer) for inp in batch]
