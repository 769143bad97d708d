"""Records of submitted batches under ``<cache root>/llm-batches`` and what a later call makes of them: recorded
batches polled and collected again, unrecorded submissions looked up on the server (``batches.list``) and adopted,
or created from their uploaded file (the resuming and crash-safe submission rules of :mod:`evalcore.llm.batch`)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from evalcore.core import storage
from evalcore.llm.batch_api import (COMPLETION_WINDOW, ENDPOINT, TERMINAL_STATUSES, BatchApi, BatchError, BatchJob,
                                    collect)
from evalcore.llm.cache import canonical_json
from evalcore.llm.client import LLMClient

STATE_DIR = "llm-batches"
SUBMIT_PREFIX = "submit-"  # records of submissions whose batch is not recorded yet
#: pages of ``batches.list`` (100 batches each) searched for a batch whose create was not recorded
LOOKUP_PAGES = 20
#: batches created this long before a submission was recorded end the search (clock skew allowance)
LOOKUP_SLACK_S = 3600
#: recorded batches in these states are not resumed (their keys are submitted anew)
_NOT_RESUMABLE = ("collected", "failed", "cancelled", "not_found")


class StateStore:
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

    def update(self, job: BatchJob, status: str) -> None:
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


def find_batch(api: BatchApi, input_file_id: str, since: float) -> Any | None:
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


def create_batch(api: BatchApi, input_file_id: str, metadata: dict[str, str] | None, since: float) -> Any:
    """Create the batch for an uploaded file; before each retry, adopt a batch an earlier attempt created."""
    retries = api.owner.config.max_retries
    for attempt in range(1, retries + 2):
        if attempt > 1:
            found = find_batch(api, input_file_id, since)
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


def adopt(states: StateStore, job: BatchJob, b: Any, keys: list[str], input_file_id: str,
           sub_uri: str | None) -> None:
    """Point ``job`` at batch ``b``, record the batch (answering ``keys``), then drop its submit record."""
    job.batch_id, job.status = b.id, b.status
    job.state_uri = states.record(b.id, b.status, keys, input_file_id)  # before anything else can fail
    if sub_uri is not None:
        states.drop(sub_uri)


def resume_jobs(api: BatchApi, states: StateStore, todo: dict[str, Any],
            metadata: dict[str, str] | None = None) -> list[BatchJob]:
    """Jobs for recorded, uncollected batches and unrecorded submissions that answer keys of ``todo``
    (see the module docstring)."""
    jobs: list[BatchJob] = []
    claimed: set[str] = set()
    for uri, state in states.pending():
        keys = [k for k in state.get("keys", []) if k in todo and k not in claimed]
        if not keys:
            continue
        job = BatchJob(keys, batch_id=state["batch_id"], status=str(state.get("status")), state_uri=uri, resumed=True)
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
                collect(api, job, b)
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
        job = BatchJob(keys, resumed=True)
        try:
            b = find_batch(api, fid, float(sub.get("submitted", 0)))
            if b is None and len(keys) < len(all_keys):  # would pay for unwanted keys: submit the wanted anew
                states.drop(uri)
                continue
            if b is None:
                b = create_batch(api, fid, metadata, float(sub.get("submitted", 0)))
        except BatchError as e:
            if e.refused:  # e.g. the file is gone: nothing was created, submit the keys anew
                states.drop(uri)
                continue
            job.error = str(e)  # cannot tell whether it exists: error rows, the record stays
        else:
            adopt(states, job, b, all_keys, fid, uri)
            if b.status in ("failed", "cancelled"):
                states.update(job, b.status)
                continue
            if b.status in TERMINAL_STATUSES:
                collect(api, job, b)
        claimed.update(keys)
        jobs.append(job)
        api.owner._log("", mode="batch", event="adopted", batch_id=job.batch_id, lines=len(keys))
    return jobs
