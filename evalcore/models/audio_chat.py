"""What the checkpoint-based audio-LM backends (``hf_audio_lm``, ``vllm_audio_lm``) share: the chat of one
request, the tokens that end an answer, and the errors of an answer that did not finish or a request whose
audio never reached the model. Plain Python: it imports in the vLLM environment and the driver's alike."""

from __future__ import annotations

import base64
import io
from typing import Any, Iterable

import numpy as np
import soundfile as sf

from evalcore.core.errors import INCOMPLETE, INPUT, MODEL


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


class AudioTooShort(ValueError):
    """The request's audio is shorter than its family needs for two audio positions: an ``input`` error row
    ``audio_too_short`` on both backends, before the model or engine sees it (:func:`too_short`)."""

    error_class = INPUT


#: the fewest samples of audio (at the checkpoint's feature-extractor rate, 16 kHz for all of them) that give two
#: audio positions, per family. Measured on tiny checkpoints (``evalcore make-checkpoint``) through both backends:
#: the Whisper-style encoders (mel hop 160, two stride-2 stages: one position per 40 ms) give one position from 321
#: samples (20.06 ms) and two from 961 (60.06 ms); below 321 vLLM refuses the request ("too short to be represented")
#: and transformers' Audio Flamingo 3 answers with no audio position at all, and with one position Qwen2-Audio's
#: transformers encoder fails while vLLM's prompt cannot show that the audio was expanded (one placeholder, one
#: position). GLM-ASR merges four encoder frames (one position per 80 ms): one position from 961 samples, two from
#: 2,241 (140.06 ms); below 961 transformers answers with no audio position. Two positions is the fewest by which
#: both backends can tell the audio reached the model, so it is the minimum on both. Voxtral's tokenizer pads every
#: clip to whole 30 s chunks (375 positions): no minimum.
MIN_AUDIO_SAMPLES = {"qwen2_audio": 961, "audioflamingo3": 961, "musicflamingo": 961, "glmasr": 2241}


def too_short(family: str, audio: Any, sample_rate: int) -> AudioTooShort | None:
    """The error of a request whose ``audio`` is too short for ``family`` (:data:`MIN_AUDIO_SAMPLES`), else None."""
    need = MIN_AUDIO_SAMPLES.get(family)
    if audio is None or need is None or len(audio) >= need:
        return None
    return AudioTooShort(f"audio_too_short: {len(audio)} samples ({len(audio) / sample_rate * 1000:.1f} ms) of audio; "
                         f"{family} needs at least {need} ({need / sample_rate * 1000:.2f} ms at {sample_rate} Hz) for "
                         "two audio positions, the fewest by which the model's input shows its audio")


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
