"""Audio LMs behind an OpenAI-compatible chat endpoint (``openai_audio_chat``).

For vLLM serving Qwen2-Audio (``vllm serve Qwen/Qwen2-Audio-7B-Instruct``) or gpt-audio-style APIs.
Each input becomes one user message whose content is the audio as a base64 16-bit PCM WAV
``input_audio`` part followed by the prompt as a ``text`` part (text-only inputs: the text part
alone), after an optional system message.

Requests go through the LLM layer (:mod:`evalcore.llm`): :class:`~evalcore.llm.client.LLMClient`
(bounded retries, Retry-After), the content-addressed response cache (the cache key covers the
model, the messages — so the audio bytes — and the parameters; ``cache_root``: the param, else
``$EVALCORE_LLM_CACHE``, else ``./.evalcore-llm-cache``; inside ``evalcore run`` the cache and
the request log default to the run's root, see :mod:`evalcore.pipeline.llm_resources`) and the
rate budget (a shared :class:`~evalcore.llm.budget.RayBudget` actor when ``budget`` names one,
so every actor of the pool shares the endpoint's RPM/TPM; otherwise one budget per actor). The
client's own token estimate counts characters, which for base64 audio is ~100× the real cost; this
backend reserves
``audio seconds × audio_tokens_per_second`` + text instead (``settle`` then corrects it with the
server's ``usage``).

The API key is read at call time from the environment variable *named* by ``api_key_env``; it is
never a parameter, never stored, cached, logged or recorded. A failed request (after retries)
is that row's error, never the batch's.
"""

from __future__ import annotations

import base64
import io
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Sequence

import numpy as np
import soundfile as sf
from pydantic import Field

from evalcore.llm.budget import endpoint_budget
from evalcore.llm.cache import RequestLog, ResponseCache
from evalcore.llm.client import EndpointConfig, LLMClient
from evalcore.llm.runner import default_cache_root
from evalcore.models.base import MODELS, AudioPrompt, MusicLM
from evalcore.core.packages import CORE
from evalcore.core.params import Count, NonEmpty, NonNegative, PathStr, Positive, Rate, Seconds

TEMPLATE_VERSION = "openai_audio_chat@1"  # bump when the message layout changes (part of the cache key)


def wav_base64(audio: np.ndarray, sample_rate: int) -> str:
    """Mono float audio → base64 of a 16-bit PCM WAV file."""
    buf = io.BytesIO()
    sf.write(buf, np.clip(np.asarray(audio, dtype=np.float32), -1.0, 1.0), sample_rate, format="WAV",
             subtype="PCM_16")
    return base64.b64encode(buf.getvalue()).decode("ascii")


class EndpointFailed(RuntimeError):
    """The endpoint gave no answer for one input; ``error_class`` is the call's failure class."""

    def __init__(self, reason: str, error_class: str | None = None) -> None:
        super().__init__(reason)
        self.error_class = error_class


class EstimatedBudget:
    """A budget that reserves the caller's own token estimate (set per thread) instead of the client's."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.local = threading.local()

    def acquire(self, n_tokens: int) -> Any:
        est = getattr(self.local, "tokens", None)
        return self.inner.acquire(n_tokens if est is None else min(n_tokens, est))

    def settle(self, lease: Any, actual_tokens: int | None) -> None:
        self.inner.settle(lease, actual_tokens)

    def penalize(self, retry_after_s: float) -> None:
        self.inner.penalize(retry_after_s)

    def pause(self, seconds: float) -> None:
        self.inner.pause(seconds)

    def stats(self) -> dict[str, Any]:
        return self.inner.stats()


@MODELS.register("openai_audio_chat")
class OpenAIAudioChat(MusicLM):
    """An audio chat model behind an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    sample_rate = 16_000
    max_audio_seconds = 30.0
    llm_backed = True  # a run sets its cache/log roots and holds its budget (pipeline.llm_resources)
    requires = ("openai",)  # checked before any model runs (evalcore.core.packages)
    install_hint = CORE

    def __init__(
        self,
        base_url: NonEmpty,
        model: NonEmpty,
        rpm: Count = 60,
        tpm: Count = 100_000,
        api_key_env: str = "OPENAI_API_KEY",
        sample_rate: Rate = 16_000,
        max_audio_seconds: Seconds | None = 30.0,
        system_prompt: str | None = None,
        max_tokens: Count = 256,
        temperature: Annotated[float, Field(ge=0)] = 0.0,
        seed: int = 0,
        timeout_s: Seconds = 120.0,
        max_retries: NonNegative = 5,
        cache_root: PathStr | None = None,
        budget: str | None = None,
        threads: Count = 8,
        audio_tokens_per_second: Positive = 25.0,
        revision: str | None = None,
        log_root: str | None = None,
        flights: str | None = None,
    ) -> None:
        if not isinstance(api_key_env, str) or not api_key_env.isidentifier():
            raise ValueError("openai_audio_chat params.api_key_env: the *name* of an environment variable "
                             f"(e.g. OPENAI_API_KEY), got {api_key_env!r}")
        if sample_rate <= 0:
            raise ValueError(f"openai_audio_chat params.sample_rate: must be > 0, got {sample_rate}")
        self.config = EndpointConfig(base_url=base_url, model=model, rpm=rpm, tpm=tpm, api_key_env=api_key_env,
                                     timeout_s=timeout_s, max_retries=max_retries, temperature=temperature,
                                     seed=seed, max_tokens=max_tokens, flights=flights)
        self.sample_rate = int(sample_rate)
        self.max_audio_seconds = max_audio_seconds
        self.system_prompt = system_prompt
        self.cache_root = cache_root
        self.budget_name = budget
        self.threads = max(1, int(threads))
        self.audio_tokens_per_second = float(audio_tokens_per_second)
        self.revision = revision
        self.log_root = log_root
        self._client: Any = None

    @property
    def client(self) -> Any:
        """The LLM layer's client (built on first use, in the actor)."""
        if self._client is None:
            cfg = self.config
            log = RequestLog.for_run(self.log_root, "openai_audio_chat") if self.log_root else None
            self._client = LLMClient(cfg, EstimatedBudget(endpoint_budget(self.budget_name, cfg.rpm, cfg.tpm)),
                                     cache=ResponseCache(self.cache_root or default_cache_root()), log=log)
        return self._client

    def shared_budget(self) -> dict[str, Any] | None:
        """``{name, rpm, tpm}`` of the named Ray budget the pool shares, if any."""
        c = self.config
        return {"name": self.budget_name, "rpm": c.rpm, "tpm": c.tpm} if self.budget_name else None

    def generation_settings(self) -> dict[str, Any]:
        c = self.config
        return {"max_tokens": c.max_tokens, "temperature": c.temperature, "seed": c.seed}

    def info(self) -> dict[str, Any]:
        return {**super().info(), "checkpoint": {"uri": f"{self.config.base_url}#{self.config.model}",
                                                 "sha256": None, "revision": self.revision},
                "endpoint": self.config.base_url, "served_model": self.config.model,
                "system_prompt": self.system_prompt, "template_version": TEMPLATE_VERSION}

    def messages(self, inp: AudioPrompt) -> list[dict]:
        """The chat messages of one input (audio part first, then the prompt)."""
        content: list[dict] = []
        if inp.audio is not None:
            if inp.sample_rate != self.sample_rate:
                raise ValueError(f"audio at {inp.sample_rate} Hz, the model takes {self.sample_rate} Hz")
            content.append({"type": "input_audio",
                            "input_audio": {"data": wav_base64(inp.audio, inp.sample_rate), "format": "wav"}})
        content.append({"type": "text", "text": inp.prompt})
        msgs: list[dict] = [{"role": "user", "content": content}]
        if self.system_prompt is not None:
            msgs.insert(0, {"role": "system", "content": self.system_prompt})
        return msgs

    def estimate_tokens(self, inp: AudioPrompt) -> int:
        """Tokens to reserve: audio seconds × rate + ~4 characters a token of text + the answer budget."""
        seconds = 0.0 if inp.audio is None else len(inp.audio) / inp.sample_rate
        text = len(inp.prompt) + len(self.system_prompt or "")
        return math.ceil(seconds * self.audio_tokens_per_second + text / 3) + 16 + self.config.max_tokens

    def _one(self, inp: AudioPrompt) -> str | BaseException:
        try:
            msgs = self.messages(inp)
        except Exception as e:  # noqa: BLE001 - a bad input is that row's error
            return e
        budget = self.client.budget
        budget.local.tokens = self.estimate_tokens(inp)
        try:
            c = self.client.complete(msgs, TEMPLATE_VERSION)
        finally:
            budget.local.tokens = None
        return c.text if c.text is not None else EndpointFailed(f"endpoint: {c.error}", c.error_class)

    def generate(self, batch: Sequence[AudioPrompt]) -> list[Any]:
        """One text per input; an input whose request failed gets an exception (its row's error)."""
        if not batch:
            return []
        self.client  # built once here: the threads below share it (a race would make two budgets)
        with ThreadPoolExecutor(max_workers=min(self.threads, len(batch))) as pool:
            return list(pool.map(self._one, batch))
