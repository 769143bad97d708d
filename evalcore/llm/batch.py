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
:data:`~evalcore.llm.batch_state.LOOKUP_PAGES` pages, stopping at batches older than the submission) for one
with that ``input_file_id`` and adopts it; only if there is none does it create the batch, reusing the
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
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

from pydantic import BaseModel

from evalcore.llm.batch_api import ENDPOINT, TERMINAL_STATUSES, BatchApi, BatchError, BatchJob, collect
from evalcore.llm.batch_state import STATE_DIR, SUBMIT_PREFIX, StateStore, adopt, create_batch, resume_jobs
from evalcore.llm.cache import RequestLog, ResponseCache
from evalcore.core.errors import TRANSIENT, bounded
from evalcore.llm.client import Completion, EndpointConfig, LLMClient, parse_json_output, response_format, schema_of

__all__ = ["run_batch", "BatchRequest", "BatchError", "MAX_LINES_PER_BATCH", "TERMINAL_STATUSES", "STATE_DIR",
           "SUBMIT_PREFIX"]

MAX_LINES_PER_BATCH = 50_000  # the API's per-batch limit

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
    """Every key of ``todo`` answered: recorded batches resumed, the rest submitted ``per_batch`` lines a batch,
    all polled until they end (or ``timeout_s``, then cancelled), and their answers cached and logged."""
    cfg = client.config
    api_key = os.environ.get(cfg.api_key_env)
    if not api_key:
        err = f"environment variable {cfg.api_key_env} is not set"
        return {k: Completion(None, None, cached=False, attempts=0, error=err, key=k) for k in todo}
    api = BatchApi(client, api_key)
    states = StateStore(client)
    deadline = time.monotonic() + timeout_s
    jobs = resume_jobs(api, states, todo, metadata)
    claimed = {k for j in jobs for k in j.keys}
    keys = [k for k in todo if k not in claimed]
    wire = client.wire_format()
    for n, i in enumerate(range(0, len(keys), per_batch)):
        job = BatchJob(keys[i:i + per_batch])
        jobs.append(job)
        lines = "".join(_line(cfg.model, todo[k], wire) for k in job.keys).encode("utf-8")
        _submit(api, states, job, f"evalcore-batch-{n}.jsonl", lines, metadata)
    _poll(api, states, jobs, deadline, timeout_s, poll_interval_s, sleep)
    out = {k: _answer(client, job, k, todo[k], wire, api_key) for job in jobs for k in job.keys}
    for job in jobs:  # only now that the answers are cached: the batch need not be collected again
        if job.status in TERMINAL_STATUSES:
            states.update(job, "collected" if job.status in ("completed", "expired") else job.status)
    return out


def _submit(api: BatchApi, states: StateStore, job: BatchJob, filename: str, lines: bytes,
            metadata: dict[str, str] | None) -> None:
    """Upload ``lines`` and create ``job``'s batch; a step that fails is ``job.error`` (no batch is created twice)."""
    try:
        f = api.call("upload the input file", lambda: api.client.files.create(
            file=(filename, lines, "application/jsonl"), purpose="batch", extra_headers=api.auth))
    except BatchError as e:
        job.error = str(e)
        return
    try:  # recorded before the create: a crash from here on never leads to a second batch
        sub_uri, since = states.record_submission(f.id, job.keys), time.time()
    except OSError as e:
        job.error = f"could not record the submission of {f.id}, so it was not created: {e}"
        return
    try:
        b = create_batch(api, f.id, metadata, since)
    except BatchError as e:
        job.error = str(e)
        if e.refused and sub_uri is not None:  # nothing was created: a later call need not look for it
            states.drop(sub_uri)
        return
    adopt(states, job, b, job.keys, f.id, sub_uri)
    api.owner._log("", mode="batch", event="submitted", batch_id=b.id, lines=len(job.keys))


def _poll(api: BatchApi, states: StateStore, jobs: list[BatchJob], deadline: float, timeout_s: float,
          poll_interval_s: float, sleep: Callable[[float], None]) -> None:
    """Poll every submitted job until it is terminal (collecting its files); at ``deadline``, cancel the rest."""
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
                collect(api, job, b)
        pending = [j for j in jobs if j.batch_id and j.error is None and j.status not in TERMINAL_STATUSES]
        if not pending:
            return
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
            return
        sleep(max(0.0, min(poll_interval_s, left)))


def _answer(client: LLMClient, job: BatchJob, k: str, it: _Item, wire: str, api_key: str) -> Completion:
    """The completion of key ``k`` of ``job`` (an error one where the batch gave none, or its output does not
    validate); an answer is cached, and either is logged."""
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
    if c.text is not None and it.schema is not None:
        try:
            c = Completion(c.text, c.usage, cached=False, attempts=1, key=k,
                           data=parse_json_output(c.text, it.schema))
        except ValueError as e:
            c = Completion(None, None, cached=False, attempts=1, error=f"invalid output: {e}", key=k)
    if c.text is not None and client.cache is not None:
        schema_fields = {"output_schema": schema_of(it.schema), "wire": wire} if it.schema else {}
        client.cache.put(k, {"model": client.config.model, "template_version": it.template_version,
                             "messages": it.messages, "params": it.params, "text": c.text,
                             "usage": c.usage, **schema_fields})
    if c.text is not None:
        client._log(k, cached=False, attempt=1, usage=c.usage, messages=it.messages, text=c.text,
                    mode="batch", batch_id=job.batch_id)
    else:
        client._log(k, cached=False, attempt=c.attempts, error=c.error, messages=it.messages,
                    mode="batch", batch_id=job.batch_id)
    return c


def _line(model: str, it: _Item, wire: str) -> str:
    """One JSONL line of the batch input file (``custom_id`` = the cache key)."""
    body: dict[str, Any] = {"model": model, "messages": it.messages, **it.params}
    rf = response_format(it.schema, wire) if it.schema is not None else None
    if rf is not None:
        body["response_format"] = rf
    return json.dumps({"custom_id": it.key, "method": "POST", "url": ENDPOINT, "body": body},
                      ensure_ascii=False, sort_keys=True) + "\n"
