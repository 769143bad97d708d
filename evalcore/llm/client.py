"""One client for any OpenAI-compatible chat endpoint: budget, cache, bounded retries, error rows.

The API key is read from the environment variable *named* in the config at call time and
passed only as the request's Authorization header; no object here stores it, so pickling a
client, logging or caching can never leak it. The ``openai`` client's own retries are off
(``max_retries=0``); this module retries with jittered exponential backoff that honours
``retry-after-ms`` / ``Retry-After``. :meth:`LLMClient.complete` never raises for a failed
item: after the last attempt it returns a :class:`Completion` with ``error`` set.
"""

from __future__ import annotations

import os
import random
import re
import time
from dataclasses import asdict, dataclass
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field

from evalcore.llm.budget import Budget, Lease, TokenBucketBudget, acquire_blocking, estimate_tokens
from evalcore.llm.cache import RequestLog, ResponseCache, cache_key

_PLACEHOLDER_KEY = "key-is-sent-per-request"
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class EndpointConfig(BaseModel):
    """One OpenAI-compatible endpoint and its limits. ``api_key_env`` is a variable *name*."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    rpm: int = Field(gt=0)
    tpm: int = Field(gt=0)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(5, ge=0)
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = Field(512, gt=0)
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    max_budget_wait_s: float = Field(600.0, gt=0)


@dataclass(frozen=True)
class Completion:
    """One item's outcome: ``text`` or ``error`` (never both None)."""

    text: str | None
    usage: dict[str, int] | None
    cached: bool
    attempts: int
    error: str | None = None
    key: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_duration(value: str | None) -> float | None:
    """Seconds from "1.5", "20ms", "1s", "6m0s", "1h2m3.5s"; None if unparseable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return float(value)
    except ValueError:
        pass
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def retry_after_s(headers: Any) -> float | None:
    """``retry-after-ms`` first, then ``Retry-After`` (seconds); None if absent."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    secs = headers.get("retry-after")
    try:
        return max(0.0, float(secs)) if secs is not None else None
    except ValueError:
        return None


class LLMClient:
    """Chat completions against one endpoint, sharing ``budget``; thread-safe and picklable."""

    def __init__(
        self,
        config: EndpointConfig,
        budget: Budget | None = None,
        cache: ResponseCache | None = None,
        log: RequestLog | None = None,
    ) -> None:
        self.config = config
        self.budget = budget or TokenBucketBudget(config.rpm, config.tpm)
        self.cache = cache
        self.log = log
        self._rng = random.Random()
        self._client: openai.OpenAI | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "budget": self.budget, "cache": self.cache, "log": self.log}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    @property
    def openai_client(self) -> openai.OpenAI:
        if self._client is None:
            self._client = openai.OpenAI(base_url=self.config.base_url, api_key=_PLACEHOLDER_KEY,
                                         max_retries=0, timeout=self.config.timeout_s)
        return self._client

    def params(self, **overrides: Any) -> dict[str, Any]:
        """The request parameters (part of the cache key)."""
        cfg = self.config
        return {"temperature": cfg.temperature, "seed": cfg.seed, "max_tokens": cfg.max_tokens, **overrides}

    def complete(self, messages: list[dict], template_version: str = "", **overrides: Any) -> Completion:
        """One chat completion; cached if possible; an error row (not an exception) on failure."""
        params = self.params(**overrides)
        key = cache_key(self.config.model, messages, params, template_version)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and hit.get("text") is not None:
                self._log(key, cached=True, attempt=0, usage=hit.get("usage"))
                return Completion(hit["text"], hit.get("usage"), cached=True, attempts=0, key=key)

        api_key = os.environ.get(self.config.api_key_env)
        if not api_key:
            err = f"environment variable {self.config.api_key_env} is not set"
            self._log(key, cached=False, attempt=0, error=err)
            return Completion(None, None, cached=False, attempts=0, error=err, key=key)

        est = estimate_tokens(messages, int(params.get("max_tokens") or self.config.max_tokens))
        error = "no attempt made"
        for attempt in range(1, self.config.max_retries + 2):
            lease = acquire_blocking(self.budget, est, self.config.max_budget_wait_s, self._rng)
            if lease is None:
                error = f"rate budget wait exceeded {self.config.max_budget_wait_s}s"
                break
            text, usage, error, retry, ra = self._attempt(messages, params, api_key, lease)
            if error is None:
                assert text is not None
                if self.cache is not None:
                    self.cache.put(key, {"model": self.config.model, "template_version": template_version,
                                         "messages": messages, "params": params, "text": text, "usage": usage})
                self._log(key, cached=False, attempt=attempt, usage=usage, messages=messages, text=text)
                return Completion(text, usage, cached=False, attempts=attempt, key=key)
            error = error.replace(api_key, "***")
            self._log(key, cached=False, attempt=attempt, error=error, messages=messages)
            if not retry or attempt > self.config.max_retries:
                break
            time.sleep(ra + self._rng.uniform(0, 0.05) if ra is not None else self._backoff(attempt))
        return Completion(None, None, cached=False, attempts=attempt, error=error, key=key)

    def _attempt(self, messages: list[dict], params: dict[str, Any], api_key: str,
                 lease: Lease) -> tuple[str | None, dict[str, int] | None, str | None, bool, float | None]:
        """One HTTP call → (text, usage, error, retryable, server's retry-after seconds)."""
        settled = False
        try:
            raw = self.openai_client.chat.completions.with_raw_response.create(
                model=self.config.model, messages=messages,  # type: ignore[arg-type]
                extra_headers={"Authorization": f"Bearer {api_key}"},
                timeout=self.config.timeout_s, **params,
            )
            self._observe(raw.headers)
            resp = raw.parse()
            text = resp.choices[0].message.content
            if text is None:
                raise ValueError("response has no message content")
            usage = {"prompt_tokens": resp.usage.prompt_tokens, "completion_tokens": resp.usage.completion_tokens,
                     "total_tokens": resp.usage.total_tokens} if resp.usage else None
            self.budget.settle(lease, usage["total_tokens"] if usage else lease.tokens)
            settled = True
            return text, usage, None, False, None
        except openai.APIStatusError as e:
            ra = retry_after_s(e.response.headers)
            if e.status_code == 429:
                self.budget.penalize(ra if ra is not None else self._backoff(1))
            retry = e.status_code in _RETRYABLE_STATUS or e.status_code >= 500
            return None, None, f"HTTP {e.status_code}: {e.message}", retry, ra
        except openai.APITimeoutError:
            return None, None, f"timeout after {self.config.timeout_s}s", True, None
        except openai.APIConnectionError as e:
            return None, None, f"connection error: {e}", True, None
        except Exception as e:  # malformed body, missing fields: retried like a server error
            return None, None, f"bad response: {type(e).__name__}: {e}", True, None
        finally:
            if not settled:
                self.budget.settle(lease, None)

    def _observe(self, headers: Any) -> None:
        """Pause the shared budget when the server reports an exhausted quota."""
        for kind in ("requests", "tokens"):
            remaining = headers.get(f"x-ratelimit-remaining-{kind}")
            if remaining is not None and remaining.strip() == "0":
                reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}"))
                self.budget.pause(reset if reset is not None else 1.0)

    def _backoff(self, attempt: int) -> float:
        """Full-jitter exponential backoff."""
        cap = min(self.config.backoff_max_s, self.config.backoff_base_s * 2 ** (attempt - 1))
        return self._rng.uniform(0.5 * cap, cap)

    def _log(self, key: str, **event: Any) -> None:
        if self.log is not None:
            self.log.write({"key": key, "model": self.config.model, **event})
