"""One client for any OpenAI-compatible chat endpoint: budget, cache, bounded retries, error rows.

The API key is read from the environment variable *named* in the config at call time and
passed only as the request's Authorization header; no object here stores it, so pickling a
client, logging or caching can never leak it. The ``openai`` client's own retries are off
(``max_retries=0``); this module retries with jittered exponential backoff that honours
``retry-after-ms`` / ``Retry-After``. :meth:`LLMClient.complete` never raises for a failed
item: after the last attempt it returns a :class:`Completion` with ``error`` set.

What the server says decides what happens next (:mod:`evalcore.core.errors` names the classes):

* a connection error, a timeout, HTTP 408/409/425/429 or a 5xx that is not a validation error is
  *transient*: retried up to ``max_retries`` times with backoff;
* a 4xx is *input* (the request is invalid) and is not retried; a 5xx whose body is a validation
  error (llama.cpp's server answers invalid requests with 500) is *input* and retried once at most;
* an answer with ``finish_reason`` ``length`` (cut at the token limit) or ``content_filter`` is
  *incomplete*: never cached, never parsed, not retried;
* the final error says how many attempts were made.

Identical requests in flight at the same time (one cache key) make one call: the others wait for its
result or its error (:mod:`evalcore.llm.flights`; across the Ray workers of a run with ``flights``).

Structured output (:meth:`LLMClient.complete_json`): the answer must be a JSON object valid
against a pydantic model. The request carries ``response_format`` ``json_schema`` (strict);
a server that refuses it — any error whose body names the response format, whatever the status
code (llama.cpp answers 500 ``Input should be 'text' or 'json_object'``) — is asked again with
``json_object``, then with no ``response_format`` at all (the prompt itself must ask for JSON),
and the client remembers the step down. Every answer is validated; an invalid one is retried at most ``json_retries``
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

from evalcore.core.errors import INCOMPLETE, INPUT, MAX_REASON_CHARS, TRANSIENT, bounded, http_class, names_response_format
from evalcore.llm.budget import Budget, Lease, TokenBucketBudget, acquire_blocking, estimate_tokens
from evalcore.llm.cache import RequestLog, ResponseCache, cache_key, loggable
from evalcore.llm.flights import LEAD, flights_for
from evalcore.llm.structured import STRUCTURED_FORMATS, parse_json_output, response_format, schema_of

__all__ = ["Completion", "EndpointConfig", "LLMClient", "STRUCTURED_FORMATS", "UNFINISHED", "parse_duration",
           "parse_json_output", "response_format", "retry_after_s", "schema_of"]

_PLACEHOLDER_KEY = "key-is-sent-per-request"
#: finish reasons of an answer that did not finish (never cached, never parsed)
UNFINISHED = {"length": "cut at the token limit", "content_filter": "stopped by a content filter"}


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
    #: the run's single-flight actor (:mod:`evalcore.llm.flights`); None = the threads of this process only
    flights: str | None = None


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
    #: the failure class of ``error`` (:data:`evalcore.core.errors.CLASSES`)
    error_class: str | None = None
    #: True when an identical request in flight made the call and this one shared its outcome
    shared: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Try:
    """One HTTP call's outcome."""

    text: str | None = None
    usage: dict[str, int] | None = None
    error: str | None = None
    error_class: str | None = None
    retry_after: float | None = None
    status: int | None = None
    body: str = ""


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

        With ``schema`` the answer must be JSON valid for it (see :meth:`complete_json`). An identical
        request already in flight is not sent again: this call shares its outcome.
        """
        key, params = self.request_key(messages, template_version, schema, **overrides)
        hit = self._cached(key, schema)
        if hit is not None:
            return hit
        cfg = self.config
        flights = flights_for(cfg.flights)
        flight = f"{cfg.base_url}|{key}"
        wait_s = cfg.max_budget_wait_s + (cfg.max_retries + cfg.json_retries + 3) * (cfg.timeout_s + cfg.backoff_max_s)
        got = flights.claim(flight, wait_s)
        if got != LEAD:
            self._log(key, cached=False, attempt=0, shared=True, error=got.get("error"))
            return Completion(**{**got, "shared": True, "cached": False, "attempts": 0})
        result: Completion | None = None
        try:
            result = self._cached(key, schema) or self._call(key, messages, params, template_version, schema)
        finally:
            flights.finish(flight, (result or Completion(None, None, cached=False, attempts=0, key=key,
                                                         error="the leading call raised",
                                                         error_class=TRANSIENT)).to_dict())
        return result

    def _cached(self, key: str, schema: type[BaseModel] | None) -> Completion | None:
        """The cached answer of ``key`` (validated against ``schema``), else None."""
        if self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None or hit.get("text") is None:
            return None
        try:
            data = parse_json_output(hit["text"], schema) if schema is not None else None
        except ValueError:
            return None  # a stale record that no longer validates: ask again
        self._log(key, cached=True, attempt=0, usage=hit.get("usage"))
        return Completion(hit["text"], hit.get("usage"), cached=True, attempts=0, key=key, data=data)

    def _call(self, key: str, messages: list[dict], params: dict[str, Any], template_version: str,
              schema: type[BaseModel] | None) -> Completion:
        """Call the endpoint until an answer, a final error or the retry bound (see module doc)."""
        cfg = self.config
        api_key = os.environ.get(cfg.api_key_env)
        if not api_key:
            err = f"environment variable {cfg.api_key_env} is not set"
            self._log(key, cached=False, attempt=0, error=err)
            return Completion(None, None, cached=False, attempts=0, error=err, key=key, error_class=INPUT)

        est = estimate_tokens(messages, int(params.get("max_tokens") or cfg.max_tokens))
        error: str = "no attempt made"
        error_class: str | None = TRANSIENT
        attempt = failures = invalid = rejected = 0
        logged_messages = False
        # hard bound: every retry, every invalid answer and each format step-down at most once
        for attempt in range(1, cfg.max_retries + cfg.json_retries + len(STRUCTURED_FORMATS) + 2):
            lease = acquire_blocking(self.budget, est, cfg.max_budget_wait_s, self._rng)
            if lease is None:
                error, error_class = f"rate budget wait exceeded {cfg.max_budget_wait_s}s", TRANSIENT
                break
            wire = self._wire if schema is not None else None
            rf = response_format(schema, wire) if schema is not None and wire is not None else None
            sent = {**params, "response_format": rf} if rf is not None else params
            t = self._attempt(messages, sent, api_key, lease)
            fmt = {"wire": wire} if schema else {}
            # the request's messages go into the log once (payloads elided), not with every retry
            logged = {} if logged_messages else {"messages": loggable(messages)}
            logged_messages = True
            if t.error is None and schema is not None:
                try:
                    data = parse_json_output(t.text or "", schema)
                except ValueError as e:
                    error, error_class = f"invalid output: {e}", None  # the stage says: judge or model
                    invalid += 1
                    self._log(key, cached=False, attempt=attempt, error=error, text=t.text, **logged, **fmt)
                    if invalid > cfg.json_retries:
                        break
                    continue
            else:
                data = None
            if t.error is None:
                assert t.text is not None
                if self.cache is not None:
                    self.cache.put(key, {"model": cfg.model, "template_version": template_version,
                                         "messages": messages, "params": params, "text": t.text, "usage": t.usage,
                                         **({"output_schema": schema_of(schema), "wire": wire} if schema else {})})
                self._log(key, cached=False, attempt=attempt, usage=t.usage, text=t.text, **logged, **fmt)
                return Completion(t.text, t.usage, cached=False, attempts=attempt, key=key, data=data)
            error, error_class = t.error.replace(api_key, "***"), t.error_class or TRANSIENT
            self._log(key, cached=False, attempt=attempt, error=error, error_class=error_class, **logged, **fmt)
            if error_class == INCOMPLETE:
                break  # the same request gives the same cut answer: never retried, never cached
            if rf is not None and t.status is not None and names_response_format(t.body) \
                    and self._step_down(wire):  # type: ignore[arg-type]
                continue  # the server refused this response_format: ask again with a weaker one
            if error_class == INPUT:
                rejected += 1  # a 4xx is final; a 5xx validation error gets one more try
                if t.status is None or t.status < 500 or rejected > 1:
                    break
            failures += 1
            if failures > cfg.max_retries:
                break
            time.sleep(t.retry_after + self._rng.uniform(0, 0.05) if t.retry_after is not None
                       else self._backoff(failures))
        said = f" (after {attempt} attempt{'' if attempt == 1 else 's'})"
        # room for the attempts and for a caller's prefix ("endpoint: ") within the stored cap
        return Completion(None, None, cached=False, attempts=attempt, key=key, error_class=error_class,
                          error=bounded(error, MAX_REASON_CHARS - 64 - len(said)) + said)

    def _attempt(self, messages: list[dict], params: dict[str, Any], api_key: str, lease: Lease) -> _Try:
        """One HTTP call → its outcome: text and usage, or the error with its class and the server's advice."""
        settled = False
        try:
            raw = self.openai_client.chat.completions.with_raw_response.create(
                model=self.config.model, messages=messages,  # type: ignore[arg-type]
                extra_headers={"Authorization": f"Bearer {api_key}"},
                timeout=self.config.timeout_s, **params,
            )
            self._observe(raw.headers)
            resp = raw.parse()
            choice = resp.choices[0]
            usage = {"prompt_tokens": resp.usage.prompt_tokens, "completion_tokens": resp.usage.completion_tokens,
                     "total_tokens": resp.usage.total_tokens} if resp.usage else None
            self.budget.settle(lease, usage["total_tokens"] if usage else lease.tokens)
            settled = True
            if choice.finish_reason in UNFINISHED:
                n = f" after {usage['completion_tokens']} tokens" if usage else ""
                return _Try(error=f"incomplete: the answer was {UNFINISHED[choice.finish_reason]}{n} "
                                  f"(finish_reason {choice.finish_reason!r}, max_tokens {params.get('max_tokens')}): "
                                  f"{(choice.message.content or '')[:80]!r}",
                            error_class=INCOMPLETE, status=raw.status_code)
            if choice.message.content is None:
                return _Try(error="bad response: response has no message content", error_class=TRANSIENT,
                            status=raw.status_code)
            return _Try(text=choice.message.content, usage=usage, status=raw.status_code)
        except openai.APIStatusError as e:
            ra = retry_after_s(e.response.headers)
            if e.status_code == 429:
                self.budget.penalize(ra if ra is not None else self._backoff(1))
            body = f"{e.message} {e.body}"
            return _Try(error=bounded(f"HTTP {e.status_code}: {e.message}"),
                        error_class=http_class(e.status_code, body), retry_after=ra, status=e.status_code,
                        body=body)
        except openai.APITimeoutError:
            return _Try(error=f"timeout after {self.config.timeout_s}s", error_class=TRANSIENT)
        except openai.APIConnectionError as e:
            return _Try(error=f"connection error: {e}", error_class=TRANSIENT)
        except Exception as e:  # malformed body, missing fields: retried like a server error
            return _Try(error=bounded(f"bad response: {type(e).__name__}: {e}"), error_class=TRANSIENT)
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
            if event.get("error") is not None:
                event["error"] = bounded(event["error"])
            self.log.write({"key": key, "model": self.config.model, **event})
