"""OpenAI Batch API mode (half price, separate limits) through the same response cache.

:func:`run_batch` answers every request whose cache key is already stored from the cache and
submits only the rest: one JSONL input file (``custom_id`` = the cache key, one line per
distinct key) uploaded with ``purpose="batch"``, one batch on ``/v1/chat/completions`` with a
``24h`` completion window, polled until it is completed, failed, expired or cancelled (or
until ``timeout_s``, then cancelled), and its output and error files downloaded and matched
back by ``custom_id``. Every successful line is written to the cache with the same record
as :meth:`LLMClient.complete`, so batch and online runs share answers. A line that failed, a
non-200 line, or a line missing from both files becomes an error :class:`Completion`;
nothing is dropped and the result list has one entry per request, in input order.

A request may carry ``"schema"`` (a pydantic model): its line asks for structured output
(``response_format`` in the client's current wire format) and its answer is validated; an
invalid answer is an error ``invalid output: ...`` and is not cached. Its cache key is the
one :meth:`LLMClient.complete_json` uses, so online and batch runs share answers.

Resuming: with a cache, every submitted batch is recorded under
``<cache root>/llm-batches/<batch id>.json`` (batch id, input file id, endpoint, model, status
and the cache keys it answers; nothing secret) right after it is created, and updated when it
ends. A later call (e.g. after the polling process was killed) first looks for recorded batches
of the same endpoint and model that are not yet collected and answer some of its keys, and
polls and collects those instead of submitting their keys again. A recorded batch that the
server no longer knows, or that failed or was cancelled, is marked so and its keys are
submitted anew. Two processes may poll the same batch; both collect the same answers.

Crash-safe submission: after the input file is uploaded and *before* the batch is created, a
record ``llm-batches/submit-<uuid>.json`` with status ``submitting`` names the uploaded file id
and the keys. Once the batch record is written it is deleted. A later call that finds such a
record (the process died between ``batches.create`` and the batch record, or the create
response was lost) searches the server's batches (``batches.list``, newest first, at most
:data:`LOOKUP_PAGES` pages, stopping at batches older than the submission) for one with that
``input_file_id`` and adopts it; only if there is none does it create the batch, reusing the
recorded file (no second upload). If not every key of that file is still wanted, it is not
created and the wanted keys are submitted anew. A create that failed in a retryable way
(timeout, 5xx, connection) is looked up the same way before it is retried, so a create that
reached the server is never repeated. If the lookup itself fails or is inconclusive, the keys
become error rows and the record is kept (no batch is ever created twice; delete the record to
force a new submission). A process killed between the upload and the ``submitting`` record
leaves an unused input file on the server (files are not billed as requests); the next call
uploads again.

The API key is read from the environment variable named in the config and sent only as the
Authorization header of each call, like :class:`~evalcore.llm.client.LLMClient`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, Union

import openai
from pydantic import BaseModel

from evalcore import jsonl, storage
from evalcore.llm.cache import RequestLog, ResponseCache, canonical_json
from evalcore.errors import INCOMPLETE, TRANSIENT, bounded, http_class
from evalcore.llm.client import (UNFINISHED, Completion, EndpointConfig, LLMClient, parse_json_output,
                                 response_format, schema_of)

__all__ = ["run_batch", "BatchRequest", "BatchError", "MAX_LINES_PER_BATCH", "TERMINAL_STATUSES"]

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
MAX_LINES_PER_BATCH = 50_000  # the API's per-batch limit
TERMINAL_STATUSES = ("completed", "failed", "expired", "cancelled")

STATE_DIR = "llm-batches"
SUBMIT_PREFIX = "submit-"  # records of submissions whose batch is not recorded yet
#: pages of ``batches.list`` (100 batches each) searched for a batch whose create was not recorded
LOOKUP_PAGES = 20
#: batches created this long before a submission was recorded end the search (clock skew allowance)
LOOKUP_SLACK_S = 3600
#: recorded batches in these states are not resumed (their keys are submitted anew)
_NOT_RESUMABLE = ("collected", "failed", "cancelled", "not_found")

# one request: a list of messages, or {"messages": [...], "template_version": "...",
# "schema": PydanticModel, "params": {...}} (any other key is also taken as a parameter override)
BatchRequest = Union[list, dict]


@dataclass
class _Item:
    key: str
    messages: list[dict]
    params: dict[str, Any]
    template_version: str
    schema: type[BaseModel] | None = None


@dataclass
class _Job:
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


def _normalize(req: Any) -> tuple[list[dict], str, type[BaseModel] | None, dict[str, Any]]:
    if isinstance(req, list):
        return req, "", None, {}
    if not isinstance(req, dict) or "messages" not in req:
        raise TypeError(f"a batch request is a list of messages or a dict with 'messages', not {req!r:.80}")
    overrides = dict(req.get("params") or {})
    overrides.update({k: v for k, v in req.items() if k not in ("messages", "template_version", "params", "schema")})
    return req["messages"], str(req.get("template_version") or ""), req.get("schema"), overrides


def run_batch(
    client_or_config: LLMClient | EndpointConfig,
    requests: Sequence[BatchRequest],
    poll_interval_s: float = 30.0,
    timeout_s: float = 24 * 3600.0,
    *,
    cache_root: str | None = None,
    log: RequestLog | None = None,
    metadata: dict[str, str] | None = None,
    max_lines_per_batch: int = MAX_LINES_PER_BATCH,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Completion]:
    """One :class:`Completion` per request, in input order (see the module docstring).

    ``client_or_config``: an :class:`LLMClient` (its cache and log are used) or an
    :class:`EndpointConfig` (then ``cache_root`` / ``log`` give the cache and log; given with a
    client that has none, they are attached to it).
    Polling is bounded by ``timeout_s``; the batch is cancelled when it runs out.
    """
    if isinstance(client_or_config, LLMClient):
        client = client_or_config
    else:
        client = LLMClient(client_or_config, cache=ResponseCache(cache_root) if cache_root else None, log=log)
    if client.cache is None and cache_root:
        client.cache = ResponseCache(cache_root)
    if log is not None:
        client.log = log
    cfg = client.config

    items: list[_Item] = []
    for req in requests:
        messages, tv, schema, overrides = _normalize(req)
        key, params = client.request_key(messages, tv, schema, **overrides)
        items.append(_Item(key, messages, params, tv, schema))

    results: dict[str, Completion] = {}
    todo: dict[str, _Item] = {}  # distinct uncached keys, first occurrence order
    for it in items:
        if it.key in results or it.key in todo:
            continue
        hit = client.cache.get(it.key) if client.cache is not None else None
        if hit is not None and hit.get("text") is not None:
            try:
                data = parse_json_output(hit["text"], it.schema) if it.schema is not None else None
            except ValueError:
                todo[it.key] = it  # a stale record that no longer validates: ask again
                continue
            results[it.key] = Completion(hit["text"], hit.get("usage"), cached=True, attempts=0, key=it.key,
                                         data=data)
            client._log(it.key, cached=True, attempt=0, usage=hit.get("usage"), mode="batch")
        else:
            todo[it.key] = it

    if todo:
        results.update(_submit_and_collect(client, todo, poll_interval_s, timeout_s, metadata,
                                           max(1, max_lines_per_batch), sleep))
    if client.log is not None:
        client.log.flush()
    return [results[it.key] for it in items]


def _submit_and_collect(client: LLMClient, todo: dict[str, _Item], poll_interval_s: float, timeout_s: float,
                        metadata: dict[str, str] | None, per_batch: int,
                        sleep: Callable[[float], None]) -> dict[str, Completion]:
    cfg = client.config
    api_key = os.environ.get(cfg.api_key_env)
    if not api_key:
        err = f"environment variable {cfg.api_key_env} is not set"
        return {k: Completion(None, None, cached=False, attempts=0, error=err, key=k) for k in todo}
    api = _Api(client, api_key)
    states = _StateStore(client)
    deadline = time.monotonic() + timeout_s
    jobs = _resume(api, states, todo, metadata)
    claimed = {k for j in jobs for k in j.keys}
    keys = [k for k in todo if k not in claimed]
    wire = client.wire_format()
    for n, i in enumerate(range(0, len(keys), per_batch)):
        job = _Job(keys[i:i + per_batch])
        jobs.append(job)
        lines = "".join(_line(cfg.model, todo[k], wire) for k in job.keys).encode("utf-8")
        try:
            f = api.call("upload the input file", lambda: api.client.files.create(
                file=(f"evalcore-batch-{n}.jsonl", lines, "application/jsonl"), purpose="batch",
                extra_headers=api.auth))
        except BatchError as e:
            job.error = str(e)
            continue
        try:  # recorded before the create: a crash from here on never leads to a second batch
            sub_uri, since = states.record_submission(f.id, job.keys), time.time()
        except OSError as e:
            job.error = f"could not record the submission of {f.id}, so it was not created: {e}"
            continue
        try:
            b = _create(api, f.id, metadata, since)
        except BatchError as e:
            job.error = str(e)
            if e.refused and sub_uri is not None:  # nothing was created: a later call need not look for it
                states.drop(sub_uri)
            continue
        _adopt(states, job, b, job.keys, f.id, sub_uri)
        client._log("", mode="batch", event="submitted", batch_id=b.id, lines=len(job.keys))

    # poll every submitted job until it is terminal; bounded by the deadline
    while True:
        pending = [j for j in jobs if j.batch_id and j.error is None and j.status not in TERMINAL_STATUSES]
        for job in pending:
            try:
                b = api.call("retrieve the batch", lambda: api.client.batches.retrieve(
                    job.batch_id, extra_headers=api.auth))
            except BatchError as e:
                job.error = str(e)
                continue
            job.status = b.status
            if b.status in TERMINAL_STATUSES:
                _collect(api, job, b)
        pending = [j for j in jobs if j.batch_id and j.error is None and j.status not in TERMINAL_STATUSES]
        if not pending:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            for job in pending:
                job.error = f"batch {job.batch_id} not finished after {timeout_s}s (status {job.status}); cancelled"
                try:
                    api.call("cancel the batch", lambda: api.client.batches.cancel(
                        job.batch_id, extra_headers=api.auth), retries=0)
                except BatchError:
                    pass
                states.update(job, "cancelled")
            break
        sleep(max(0.0, min(poll_interval_s, left)))

    out: dict[str, Completion] = {}
    for job in jobs:
        for k in job.keys:
            c = job.results.get(k)
            if c is None:
                if job.error is not None:
                    err = job.error
                elif job.status != "completed":
                    err = f"batch {job.batch_id} ended {job.status} without an answer for this request"
                else:
                    err = f"missing from the output of batch {job.batch_id}"
                c = Completion(None, None, cached=False, attempts=1 if job.batch_id else 0,
                               error=bounded(err.replace(api_key, "***")), key=k, error_class=TRANSIENT)
            it = todo[k]
            if c.text is not None and it.schema is not None:
                try:
                    c = Completion(c.text, c.usage, cached=False, attempts=1, key=k,
                                   data=parse_json_output(c.text, it.schema))
                except ValueError as e:
                    c = Completion(None, None, cached=False, attempts=1, error=f"invalid output: {e}", key=k)
            if c.text is not None and client.cache is not None:
                schema_fields = {"output_schema": schema_of(it.schema), "wire": wire} if it.schema else {}
                client.cache.put(k, {"model": cfg.model, "template_version": it.template_version,
                                     "messages": it.messages, "params": it.params, "text": c.text,
                                     "usage": c.usage, **schema_fields})
            if c.text is not None:
                client._log(k, cached=False, attempt=1, usage=c.usage, messages=todo[k].messages, text=c.text,
                            mode="batch", batch_id=job.batch_id)
            else:
                client._log(k, cached=False, attempt=c.attempts, error=c.error, messages=todo[k].messages,
                            mode="batch", batch_id=job.batch_id)
            out[k] = c
    for job in jobs:  # only now that the answers are cached: the batch need not be collected again
        if job.status in TERMINAL_STATUSES:
            states.update(job, "collected" if job.status in ("completed", "expired") else job.status)
    return out


def _line(model: str, it: _Item, wire: str) -> str:
    """One JSONL line of the batch input file (``custom_id`` = the cache key)."""
    body: dict[str, Any] = {"model": model, "messages": it.messages, **it.params}
    rf = response_format(it.schema, wire) if it.schema is not None else None
    if rf is not None:
        body["response_format"] = rf
    return json.dumps({"custom_id": it.key, "method": "POST", "url": ENDPOINT, "body": body},
                      ensure_ascii=False, sort_keys=True) + "\n"


class _StateStore:
    """Records of submitted batches under ``<cache root>/llm-batches`` (none without a cache)."""

    def __init__(self, client: LLMClient) -> None:
        self.root = storage.join(client.cache.root, STATE_DIR) if client.cache is not None else None
        self.endpoint = {"base_url": client.config.base_url, "model": client.config.model}

    def record(self, batch_id: str, status: str, keys: list[str], input_file_id: str | None = None) -> str | None:
        if self.root is None:
            return None
        uri = storage.join(self.root, f"{batch_id}.json")
        self._write(uri, {"batch_id": batch_id, "status": status, "keys": keys, "input_file_id": input_file_id,
                          **self.endpoint, "submitted": round(time.time(), 3), "updated": round(time.time(), 3)})
        return uri

    def record_submission(self, input_file_id: str, keys: list[str]) -> str | None:
        """Record an uploaded input file about to become a batch (status ``submitting``)."""
        if self.root is None:
            return None
        uri = storage.join(self.root, f"{SUBMIT_PREFIX}{uuid.uuid4().hex}.json")
        now = round(time.time(), 3)
        self._write(uri, {"status": "submitting", "input_file_id": input_file_id, "keys": keys, **self.endpoint,
                          "submitted": now, "updated": now})
        return uri

    def submissions(self) -> list[tuple[str, dict[str, Any]]]:
        """(uri, record) of this endpoint's submissions whose batch was never recorded, oldest first."""
        return sorted(((u, s) for u, s in self._records() if self._is_submission(u)
                       and s.get("status") == "submitting" and s.get("input_file_id")),
                      key=lambda x: x[1].get("submitted", 0))

    def file_ids(self) -> set[str]:
        """Input file ids of every recorded batch of this endpoint (any status)."""
        return {s["input_file_id"] for u, s in self._records() if not self._is_submission(u)
                and s.get("input_file_id")}

    @staticmethod
    def drop(uri: str) -> None:
        storage.delete(uri)

    @staticmethod
    def _is_submission(uri: str) -> bool:
        return uri.rsplit("/", 1)[-1].startswith(SUBMIT_PREFIX)

    def _records(self) -> list[tuple[str, dict[str, Any]]]:
        """(uri, record) of every readable record of this endpoint."""
        if self.root is None:
            return []
        out = []
        for uri in storage.list_files(self.root, ".json"):
            state = self.read(uri)
            if state is not None and all(state.get(k) == v for k, v in self.endpoint.items()):
                out.append((uri, state))
        return out

    def update(self, job: _Job, status: str) -> None:
        if job.state_uri is None:
            return
        state = self.read(job.state_uri) or {"batch_id": job.batch_id, "keys": job.keys, **self.endpoint}
        self._write(job.state_uri, {**state, "status": status, "updated": round(time.time(), 3)})

    def read(self, uri: str) -> dict[str, Any] | None:
        try:
            state = json.loads(storage.read_bytes(uri))
        except (FileNotFoundError, OSError, ValueError):
            return None
        return state if isinstance(state, dict) else None

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        """(uri, record) of this endpoint's recorded batches that may still be collected, oldest first."""
        out = [(u, s) for u, s in self._records() if not self._is_submission(u)
               and s.get("status") not in _NOT_RESUMABLE and s.get("batch_id")]
        return sorted(out, key=lambda x: x[1].get("submitted", 0))

    @staticmethod
    def _write(uri: str, state: dict[str, Any]) -> None:
        storage.write_bytes(uri, canonical_json(state).encode("utf-8"))


def _find(api: "_Api", input_file_id: str, since: float) -> Any | None:
    """The server's batch created from ``input_file_id`` (``batches.list``, newest first), else None.

    Stops at a page's end once its batches are older than ``since`` − :data:`LOOKUP_SLACK_S`, or when
    the list ends; raises :class:`BatchError` if the list fails or :data:`LOOKUP_PAGES` pages did not
    reach that point (then it cannot tell)."""
    after: str | None = None
    for _ in range(LOOKUP_PAGES):
        try:
            page = api.call("list the batches", lambda: api.client.batches.list(
                limit=100, extra_headers=api.auth, **({"after": after} if after else {})))
        except BatchError as e:  # never "refused": a failed lookup says nothing about the create
            raise BatchError(f"{e}; cannot tell whether a batch was created from {input_file_id}") from None
        data = list(page.data or [])
        for b in data:
            if getattr(b, "input_file_id", None) == input_file_id:
                return b
        if not data or page.has_more is False or min(int(b.created_at) for b in data) < since - LOOKUP_SLACK_S:
            return None
        after = data[-1].id
    raise BatchError(f"could not tell whether a batch was created from {input_file_id}: not among the newest "
                     f"{LOOKUP_PAGES * 100} batches; delete its submit record to submit again")


def _create(api: "_Api", input_file_id: str, metadata: dict[str, str] | None, since: float) -> Any:
    """Create the batch for an uploaded file; before each retry, adopt a batch an earlier attempt created."""
    retries = api.owner.config.max_retries
    for attempt in range(1, retries + 2):
        if attempt > 1:
            found = _find(api, input_file_id, since)
            if found is not None:
                return found
        try:
            return api.call("create the batch", lambda: api.client.batches.create(
                input_file_id=input_file_id, endpoint=ENDPOINT, completion_window=COMPLETION_WINDOW,
                metadata=metadata, extra_headers=api.auth), retries=0)
        except BatchError as e:
            if not e.retryable or attempt > retries:
                raise
            time.sleep(api.owner._backoff(attempt))
    raise AssertionError("unreachable")


def _adopt(states: _StateStore, job: _Job, b: Any, keys: list[str], input_file_id: str,
           sub_uri: str | None) -> None:
    """Point ``job`` at batch ``b``, record the batch (answering ``keys``), then drop its submit record."""
    job.batch_id, job.status = b.id, b.status
    job.state_uri = states.record(b.id, b.status, keys, input_file_id)  # before anything else can fail
    if sub_uri is not None:
        states.drop(sub_uri)


def _resume(api: "_Api", states: _StateStore, todo: dict[str, _Item],
            metadata: dict[str, str] | None = None) -> list[_Job]:
    """Jobs for recorded, uncollected batches and unrecorded submissions that answer keys of ``todo``
    (see the module docstring)."""
    jobs: list[_Job] = []
    claimed: set[str] = set()
    for uri, state in states.pending():
        keys = [k for k in state.get("keys", []) if k in todo and k not in claimed]
        if not keys:
            continue
        job = _Job(keys, batch_id=state["batch_id"], status=str(state.get("status")), state_uri=uri, resumed=True)
        try:
            b = api.call("retrieve the batch", lambda: api.client.batches.retrieve(
                job.batch_id, extra_headers=api.auth))
        except BatchError as e:
            if "HTTP 404" in str(e):  # the server does not know it (any more): submit its keys anew
                states.update(job, "not_found")
                continue
            job.error = str(e)
        else:
            job.status = b.status
            if b.status in ("failed", "cancelled"):  # an old failure: submit its keys anew
                states.update(job, b.status)
                continue
            if b.status in TERMINAL_STATUSES:  # finished while nobody polled: collect it now
                _collect(api, job, b)
        claimed.update(keys)
        jobs.append(job)
        api.owner._log("", mode="batch", event="resumed", batch_id=job.batch_id, lines=len(keys))
    recorded = states.file_ids()
    for uri, sub in states.submissions():
        fid, all_keys = str(sub["input_file_id"]), list(sub.get("keys", []))
        if fid in recorded:  # its batch was recorded; only the cleanup was lost
            states.drop(uri)
            continue
        keys = [k for k in all_keys if k in todo and k not in claimed]
        if not keys:
            continue  # nobody asks for these keys now: left for a later call
        job = _Job(keys, resumed=True)
        try:
            b = _find(api, fid, float(sub.get("submitted", 0)))
            if b is None and len(keys) < len(all_keys):  # would pay for unwanted keys: submit the wanted anew
                states.drop(uri)
                continue
            if b is None:
                b = _create(api, fid, metadata, float(sub.get("submitted", 0)))
        except BatchError as e:
            if e.refused:  # e.g. the file is gone: nothing was created, submit the keys anew
                states.drop(uri)
                continue
            job.error = str(e)  # cannot tell whether it exists: error rows, the record stays
        else:
            _adopt(states, job, b, all_keys, fid, uri)
            if b.status in ("failed", "cancelled"):
                states.update(job, b.status)
                continue
            if b.status in TERMINAL_STATUSES:
                _collect(api, job, b)
        claimed.update(keys)
        jobs.append(job)
        api.owner._log("", mode="batch", event="adopted", batch_id=job.batch_id, lines=len(keys))
    return jobs


def _collect(api: "_Api", job: _Job, b: Any) -> None:
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
                job.results[cid] = _line_completion(cid, obj, job.batch_id)


def _line_completion(key: str, obj: dict, batch_id: str | None) -> Completion:
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


class _Api:
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
