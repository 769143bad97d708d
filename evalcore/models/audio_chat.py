"""What the checkpoint-based audio-LM backends (``hf_audio_lm``, ``vllm_audio_lm``) share: the chat of one
request, the tokens that end an answer, and the errors of an answer that did not finish or a request whose
audio never reached the model. Plain Python: it imports in the vLLM environment and the driver's alike."""

from __future__ import annotations

import base64
import io
from typing import Any, Iterable

import numpy as np
import soundfile as sf

from evalcore.errors import INCOMPLETE, MODEL


class IncompleteAnswer(RuntimeError):
    """The answer was cut at the token limit (no end-of-answer token): an ``incomplete`` error row. ``text`` keeps
    the cut answer for callers of ``generate`` (tests compare it); the error row stores only the reason."""

    error_class = INCOMPLETE

    def __init__(self, reason: str, text: str = "") -> None:
        super().__init__(reason)
        self.text = text


class AudioNotReceived(RuntimeError):
    """The request had audio, but the model's prompt holds no audio features for it (or holds audio the request
    did not have): a ``model`` error row, never an answer to a text-only prompt."""

    error_class = MODEL


def conversation(prompt: str, has_audio: bool, system_prompt: str | None = None) -> list[dict]:
    """The chat of one request: an optional system turn, then one user turn of [audio, text] (text only without
    audio), in the content format of transformers' chat templates."""
    content: list[dict] = [{"type": "audio"}] if has_audio else []
    content.append({"type": "text", "text": prompt})
    conv: list[dict] = [{"role": "user", "content": content}]
    if system_prompt is not None:
        conv.insert(0, {"role": "system", "content": [{"type": "text", "text": system_prompt}]})
    return conv


def audio_base64(audio: Any, sample_rate: int) -> str:
    """The audio as base64 of a 32-bit float WAV file: lossless, the form mistral-common's chat requests take."""
    buf = io.BytesIO()
    sf.write(buf, np.asarray(audio, dtype=np.float32), sample_rate, format="WAV", subtype="FLOAT")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def mistral_conversation(prompt: str, audio: Any, sample_rate: int, system_prompt: str | None = None) -> list[dict]:
    """:func:`conversation` with the audio itself in the user turn, for a mistral-common tokenizer (Voxtral): it
    encodes the audio into the prompt's audio positions (and pads it to whole 30 s chunks) while tokenizing."""
    conv = conversation(prompt, audio is not None, system_prompt)
    if audio is not None:
        conv[-1]["content"][0] = {"type": "audio", "base64": audio_base64(audio, sample_rate)}
    return conv


def stop_token_ids(tokenizer: Any, generation_config: dict | None) -> list[int]:
    """The ids that end an answer: the tokenizer's EOS and the checkpoint's ``generation_config.json``
    ``eos_token_id`` (an id or a list), sorted. Both backends stop on exactly these."""
    ids: set[int] = set()
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    eos = (generation_config or {}).get("eos_token_id")
    if eos is not None:
        ids.update(int(i) for i in (eos if isinstance(eos, (list, tuple)) else [eos]))
    return sorted(ids)


def incomplete(n_tokens: int, limit: int, text: str = "") -> IncompleteAnswer:
    """The error of an answer (``text``) cut at ``limit`` new tokens."""
    return IncompleteAnswer(f"incomplete: the answer was cut at the token limit ({n_tokens} new tokens, "
                            f"max_new_tokens {limit}) before an end-of-answer token", text)


def answer_view(answer: str | Exception) -> str:
    """An answer as comparable text: the text, ``incomplete: <cut text>``, or ``<class>: <reason>``."""
    if isinstance(answer, str):
        return answer
    if isinstance(answer, IncompleteAnswer):
        return f"incomplete: {answer.text}"
    return f"{getattr(answer, 'error_class', type(answer).__name__)}: {answer}"


def count(ids: Iterable[int], token: int) -> int:
    """How often ``token`` occurs in ``ids``."""
    return sum(1 for t in ids if t == token)
