"""A text LLM behind an OpenAI-compatible chat endpoint (``text_llm``): the cascade baseline and a text prior.

It reads no audio (``uses_audio = False``: the pipeline neither fetches nor decodes any): each request is its prompt
alone, as one user message, through the LLM layer exactly as :class:`~evalcore.models.openai_audio.OpenAIAudioChat`
sends it (client, response cache, request log, rate budget; its params are that backend's). Under the ``caption``
condition its prompt carries a description of the clip in place of the audio: a captioner → text LLM cascade, the
baseline an audio LM should beat by listening. Under the other conditions it answers from the question alone (what a
text-only model gets right without any audio).
"""

from __future__ import annotations

from evalcore.models.base import MODELS
from evalcore.models.openai_audio import OpenAIAudioChat


@MODELS.register("text_llm")
class TextLLM(OpenAIAudioChat):
    """A text-only chat model: the prompt, never audio."""

    uses_audio = False  # its audio is never fetched or decoded
