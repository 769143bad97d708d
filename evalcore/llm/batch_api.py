"""The Files and Batches API of an OpenAI-compatible endpoint for :mod:`evalcore.llm.batch`: calls with the
per-call auth header and bounded retries (:class:`BatchApi`), a batch job's state (:class:`BatchJob`), and a
terminal batch's output and error files read back into one :class:`~evalcore.llm.client.Completion` per key
(:func:`collect`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import openai

from evalcore.core import jsonl
from evalcore.core.errors import INCOMPLETE, TRANSIENT, bounded, http_class
from evalcore.llm.client import UNFINISHED, Completion, LLMClient

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
TERMINAL_STATUSES = ("completed", "failed", "expired", "cancelled")


@dataclass
class BatchJob:
    keys: list[str]
    batch_id: str | None = None
    status: str = "not submitted"
    error: str | None = None  # a whole-job failure (every key in it gets it)
    results: dict[str, Completion] = field(default_factory=dict)
    state_uri: str | None = None  # where this batch is recorded (None: no cache, not recorded)
    resumed: bool = False


class BatchError(RuntimeError):
    """A Files/Batches API call failed after its retries (``status``: its HTTP status, if any)."""

    def __init__(self, message: str, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable

    @property
    def refused(self) -> bool:
        """The server answered with a definitive client error: nothing was created."""
        return self.status is not None and 400 <= self.status < 500 and not self.retryable


def collect(api: BatchApi, job: BatchJob, b: Any) -> None:
    """Download a terminal batch's output and error files into ``job.results``."""
    if b.status == "failed":
        errs = getattr(getattr(b, "errors", None), "data", None) or []
        msg = "; ".join(f"{getattr(e, 'code', None)}: {getattr(e, 'message', None)}" for e in errs)
        job.error = f"batch {job.batch_id} failed" + (f": {msg}" if msg else "")
        return
    wanted = set(job.keys)
    for fid in (b.output_file_id, b.error_file_id):
        if not fid:
            continue
        try:
            raw = api.call("download the batch output", lambda: api.client.files.content(
                fid, extra_headers=api.auth)).content
        except BatchError as e:
            job.error = str(e)
            return
        for _, line in jsonl.lines(raw):
            try:
                obj = json.loads(line.decode("utf-8", errors="replace"))
            except ValueError:
                continue  # its key stays missing → an error Completion
            cid = obj.get("custom_id") if isinstance(obj, dict) else None
            if cid in wanted and cid not in job.results:
                job.results[cid] = line_completion(cid, obj, job.batch_id)


def line_completion(key: str, obj: dict, batch_id: str | None) -> Completion:
    def err(msg: str, error_class: str = TRANSIENT) -> Completion:
        return Completion(None, None, cached=False, attempts=1, error=bounded(msg), key=key, error_class=error_class)

    if obj.get("error"):
        e = obj["error"]
        return err(f"batch line error: {e.get('code')}: {e.get('message')}" if isinstance(e, dict) else
                   f"batch line error: {e}")
    resp = obj.get("response") or {}
    status = resp.get("status_code")
    body = resp.get("body") or {}
    if status != 200:
        msg = body.get("error", {}).get("message") if isinstance(body.get("error"), dict) else None
        return err(f"HTTP {status}: {msg}", http_class(int(status or 500), str(body)))
    try:
        choice = body["choices"][0]
        if choice.get("finish_reason") in UNFINISHED:
            return err(f"incomplete: the answer was {UNFINISHED[choice['finish_reason']]} "
                       f"(finish_reason {choice['finish_reason']!r})", INCOMPLETE)
        text = choice["message"]["content"]
        if text is None:
            raise ValueError("response has no message content")
        u = body.get("usage")
        usage = {k: int(u[k]) for k in ("prompt_tokens", "completion_tokens", "total_tokens")} if u else None
    except (KeyError, IndexError, TypeError, ValueError) as e:
        return err(f"bad response: {type(e).__name__}: {e}")
    return Completion(text, usage, cached=False, attempts=1, key=key)


class BatchApi:
    """The client's ``openai.OpenAI`` plus the per-call auth header and bounded retries."""

    def __init__(self, client: LLMClient, api_key: str) -> None:
        self.owner = client
        self.client = client.openai_client
        self.auth = {"Authorization": f"Bearer {api_key}"}
        self._key = api_key

    def call(self, what: str, fn: Callable[[], Any], retries: int | None = None) -> Any:
        retries = self.owner.config.max_retries if retries is None else retries
        for attempt in range(1, retries + 2):
            try:
                return fn()
            except openai.APIStatusError as e:
                error, retry, status = f"HTTP {e.status_code}: {e.message}", (
                    http_class(e.status_code, f"{e.message} {e.body}") == TRANSIENT), e.status_code
            except openai.APITimeoutError:
                error, retry, status = f"timeout after {self.owner.config.timeout_s}s", True, None
            except openai.APIConnectionError as e:
                error, retry, status = f"connection error: {e}", True, None
            error = f"could not {what}: {error}".replace(self._key, "***")
            self.owner._log("", mode="batch", attempt=attempt, error=error)
            if not retry or attempt > retries:
                raise BatchError(error, status, retry)
            time.sleep(self.owner._backoff(attempt))
        raise AssertionError("unreachable")

