"""One client for any OpenAI-compatible chat endpoint: budget, cache, bounded retries, error rows.

The API key is read from the environment variable *named* in the config at call time and
passed only as the request's Authorization header; no object here stores it, so pickling a
client, logging or caching can never leak it. The ``openai`` client's own retries are off
(``max_retries=0``); this module retries with jittered exponential backoff that honours
``retry-after-ms`` / ``Retry-After``. :meth:`LLMClient.complete` never raises for a failed
item: after the last attempt it returns a :class:`Completion` with ``error`` set.

Structured output (:meth:`LLMClient.complete_json`): the answer must be a JSON object valid
against a pydantic model. The request carries ``response_format`` ``json_schema`` (strict);
a server that refuses it (HTTP 400/422) is asked again with ``json_object``, then with no
``response_format`` at all (the prompt itself must ask for JSON), and the client remembers
the step down. Every answer is validated; an invalid one is retried at most ``json_retries``
times and never cached, then the item is an error ``invalid output: ...``. The cache key
holds the *schema* rather than the wire format, so the same request hits the cache whatever
format the server accepted.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

import openai
from pydantic import BaseModel, ConfigDict, Field

from evalcore.llm.budget import Budget, Lease, TokenBucketBudget, acquire_blocking, estimate_tokens
from evalcore.llm.cache import RequestLog, ResponseCache, cache_key

_PLACEHOLDER_KEY = "key-is-sent-per-request"
_RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
#: wire formats of structured output, strongest first (``prompt`` = no ``response_format``)
STRUCTURED_FORMATS = ("json_schema", "json_object", "prompt")


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
    #: structured output wire format: ``auto`` tries json_schema → json_object → prompt
    structured: Literal["auto", "json_schema", "json_object", "prompt"] = "auto"
    #: extra tries for an answer that is not valid JSON for the schema (bounded, never cached)
    json_retries: int = Field(2, ge=0)


@dataclass(frozen=True)
class Completion:
    """One item's outcome: ``text`` or ``error`` (never both None); ``data``: the validated JSON."""

    text: str | None
    usage: dict[str, int] | None
    cached: bool
    attempts: int
    error: str | None = None
    key: str = ""
    data: Any = None

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


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a pydantic model (part of the cache key of a structured request)."""
    return model.model_json_schema()


def response_format(model: type[BaseModel], wire: str) -> dict[str, Any] | None:
    """The ``response_format`` request field for ``wire`` (None for ``prompt``)."""
    if wire == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": model.__name__, "schema": schema_of(model),
                                                       "strict": True}}
    return {"type": "json_object"} if wire == "json_object" else None


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def parse_json_output(text: str, model: type[BaseModel]) -> dict[str, Any]:
    """Validate ``text`` (a JSON object, optionally in a Markdown code fence) → the model's dict.

    Raises ``ValueError`` with a short reason when it is not valid JSON for ``model``.
    """
    m = _FENCE.match(text or "")
    body = m.group(1) if m else (text or "")
    try:
        return model.model_validate_json(body).model_dump(mode="json")
    except Exception as e:  # pydantic.ValidationError (bad JSON or wrong shape)
        first = e.errors()[0] if hasattr(e, "errors") else {"msg": str(e)}  # type: ignore[union-attr]
        where = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
        raise ValueError(f"{where}: {first.get('msg')} in {body[:80]!r}") from None


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
        # structured output: the strongest wire format this endpoint accepted so far
        self._wire = config.structured if config.structured != "auto" else STRUCTURED_FORMATS[0]
        self._wire_lock = threading.Lock()

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

    def request_key(self, messages: list[dict], template_version: str = "",
                    schema: type[BaseModel] | None = None, **overrides: Any) -> tuple[str, dict[str, Any]]:
        """(cache key, request parameters without ``response_format``) of one request."""
        params = self.params(**overrides)
        key_params = {**params, "output_schema": schema_of(schema)} if schema is not None else params
        return cache_key(self.config.model, messages, key_params, template_version), params

    def wire_format(self) -> str:
        """The structured-output wire format the next structured request uses."""
        return self._wire

    def _step_down(self, failed: str) -> bool:
        """After a refused ``response_format``: use the next weaker format (``auto`` only)."""
        if self.config.structured != "auto" or failed == STRUCTURED_FORMATS[-1]:
            return False
        with self._wire_lock:
            if self._wire == failed:
                self._wire = STRUCTURED_FORMATS[STRUCTURED_FORMATS.index(failed) + 1]
        return True

    def complete_json(self, messages: list[dict], schema: type[BaseModel], template_version: str = "",
                      **overrides: Any) -> Completion:
        """A structured completion: ``data`` is the answer validated against ``schema`` (see module doc)."""
        return self.complete(messages, template_version, schema=schema, **overrides)

    def complete(self, messages: list[dict], template_version: str = "", *,
                 schema: type[BaseModel] | None = None, **overrides: Any) -> Completion:
        """One chat completion; cached if possible; an error row (not an exception) on failure.

        With ``schema`` the answer must be JSON valid for it (see :meth:`complete_json`).
        """
        cfg = self.config
        key, params = self.request_key(messages, template_version, schema, **overrides)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and hit.get("text") is not None:
                try:
                    data = parse_json_output(hit["text"], schema) if schema is not None else None
                except ValueError:
                    pass  # a stale record that no longer validates: ask again
                else:
                    self._log(key, cached=True, attempt=0, usage=hit.get("usage"))
                    return Completion(hit["text"], hit.get("usage"), cached=True, attempts=0, key=key, data=data)

        api_key = os.environ.get(cfg.api_key_env)
        if not api_key:
            err = f"environment variable {cfg.api_key_env} is not set"
            self._log(key, cached=False, attempt=0, error=err)
            return Completion(None, None, cached=False, attempts=0, error=err, key=key)

        est = estimate_tokens(messages, int(params.get("max_tokens") or cfg.max_tokens))
        error = "no attempt made"
        attempt = failures = invalid = 0
        # hard bound: every retry, every invalid answer and each format step-down at most once
        for attempt in range(1, cfg.max_retries + cfg.json_retries + len(STRUCTURED_FORMATS) + 2):
            lease = acquire_blocking(self.budget, est, cfg.max_budget_wait_s, self._rng)
            if lease is None:
                error = f"rate budget wait exceeded {cfg.max_budget_wait_s}s"
                break
            wire = self._wire if schema is not None else None
            rf = response_format(schema, wire) if schema is not None and wire is not None else None
            sent = {**params, "response_format": rf} if rf is not None else params
            text, usage, error, retry, ra, status = self._attempt(messages, sent, api_key, lease)
            data = None
            if error is None and schema is not None:
                try:
                    data = parse_json_output(text or "", schema)
                except ValueError as e:
                    error, ra = f"invalid output: {e}", None
                    invalid += 1
                    retry = invalid <= cfg.json_retries
                    self._log(key, cached=False, attempt=attempt, error=error, messages=messages, text=text,
                              wire=wire)
                    if not retry:
                        break
                    continue
            if error is None:
                assert text is not None
                if self.cache is not None:
                    self.cache.put(key, {"model": cfg.model, "template_version": template_version,
                                         "messages": messages, "params": params, "text": text, "usage": usage,
                                         **({"output_schema": schema_of(schema), "wire": wire} if schema else {})})
                self._log(key, cached=False, attempt=attempt, usage=usage, messages=messages, text=text,
                          **({"wire": wire} if schema else {}))
                return Completion(text, usage, cached=False, attempts=attempt, key=key, data=data)
            error = error.replace(api_key, "***")
            self._log(key, cached=False, attempt=attempt, error=error, messages=messages,
                      **({"wire": wire} if schema else {}))
            if rf is not None and status in (400, 422) and self._step_down(wire):  # type: ignore[arg-type]
                continue  # the server refused this response_format: ask again with a weaker one
            failures += 1
            if not retry or failures > cfg.max_retries:
                break
            time.sleep(ra + self._rng.uniform(0, 0.05) if ra is not None else self._backoff(failures))
        return Completion(None, None, cached=False, attempts=attempt, error=error, key=key)

    def _attempt(self, messages: list[dict], params: dict[str, Any], api_key: str, lease: Lease
                 ) -> tuple[str | None, dict[str, int] | None, str | None, bool, float | None, int | None]:
        """One HTTP call → (text, usage, error, retryable, server's retry-after seconds, HTTP status)."""
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
            return text, usage, None, False, None, raw.status_code
        except openai.APIStatusError as e:
            ra = retry_after_s(e.response.headers)
            if e.status_code == 429:
                self.budget.penalize(ra if ra is not None else self._backoff(1))
            retry = e.status_code in _RETRYABLE_STATUS or e.status_code >= 500
            return None, None, f"HTTP {e.status_code}: {e.message}", retry, ra, e.status_code
        except openai.APITimeoutError:
            return None, None, f"timeout after {self.config.timeout_s}s", True, None, None
        except openai.APIConnectionError as e:
            return None, None, f"connection error: {e}", True, None, None
        except Exception as e:  # malformed body, missing fields: retried like a server error
            return None, None, f"bad response: {type(e).__name__}: {e}", True, None, None
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
