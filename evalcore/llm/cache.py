"""Content-addressed LLM response cache and the per-run request/response log.

Cache layout: ``<root>/llm-cache/<key[:2]>/<key>.json``, one JSON object per key, written with
:func:`evalcore.core.storage.write_bytes` (temp file + rename locally, one PUT on S3), so many
concurrent writers are safe: a reader sees either no file or a whole one, and writers of the
same key write the same request. Nothing secret is ever part of a key or a record.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from typing import Any

from evalcore.core import storage


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, UTF-8 kept: the same value always gives the same string."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(model: str, messages: list[dict], params: dict[str, Any], template_version: str = "") -> str:
    """sha256 of the canonical JSON of (model, messages, params, template version)."""
    blob = canonical_json({"model": model, "messages": messages, "params": params,
                           "template_version": template_version})
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def loggable(messages: list[dict]) -> list[dict]:
    """``messages`` for the request log: every audio part's base64 data replaced by its length and sha256
    (the response cache keeps the whole request; the log stays small and never carries audio)."""
    def part(p: Any) -> Any:
        if isinstance(p, dict) and isinstance(p.get("input_audio"), dict) and isinstance(p["input_audio"].get("data"), str):
            data = p["input_audio"]["data"]
            return {**p, "input_audio": {**p["input_audio"], "data": f"<{len(data)} chars, sha256 "
                                         f"{hashlib.sha256(data.encode()).hexdigest()[:16]}>"}}
        return p

    return [{**m, "content": [part(p) for p in m["content"]]} if isinstance(m.get("content"), list) else m
            for m in messages]


class ResponseCache:
    """Responses under ``<root>/llm-cache``; ``root`` is a local path or an ``s3://`` URI."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, key: str) -> str:
        return storage.join(self.root, "llm-cache", key[:2], f"{key}.json")

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record, or None if absent or unreadable (then it is simply recomputed)."""
        try:
            record = json.loads(storage.read_bytes(self.path(key)))
        except (FileNotFoundError, OSError, ValueError):
            return None
        return record if isinstance(record, dict) and record.get("key") == key else None

    def put(self, key: str, record: dict[str, Any]) -> None:
        storage.write_bytes(self.path(key), canonical_json({**record, "key": key}).encode("utf-8"))


class RequestLog:
    """JSONL log of requests and responses for one run (no keys, no headers).

    Local paths are appended line by line. S3 objects cannot be appended to, so ``s3://``
    logs are buffered and each :meth:`flush` (also automatic every ``flush_lines`` lines, and
    :meth:`close`) writes the buffer as a new part ``<name>-<instance>-<n>.jsonl`` next to the
    URI; read the log by listing its folder. Give each process its own log, e.g.
    ``RequestLog.for_run(root, run_id)`` (the name holds the pid and a random suffix).
    """

    def __init__(self, uri: str, flush_lines: int = 1000) -> None:
        self.uri = uri
        self.flush_lines = max(1, flush_lines)
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._parts = 0
        self._token = uuid.uuid4().hex[:8]  # per instance: unpickled copies never overwrite each other's parts
        if not storage.is_s3(uri):
            os.makedirs(os.path.dirname(os.path.abspath(uri)), exist_ok=True)

    @classmethod
    def for_run(cls, root: str, run_id: str) -> "RequestLog":
        return cls(storage.join(root, "llm-log", f"{run_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"))

    def part_uri(self, n: int) -> str:
        """The ``n``-th part of an ``s3://`` log."""
        stem = self.uri[:-len(".jsonl")] if self.uri.endswith(".jsonl") else self.uri
        return f"{stem}-{self._token}-{n:05d}.jsonl"

    def write(self, event: dict[str, Any]) -> None:
        line = canonical_json({"ts": round(time.time(), 3), **event}) + "\n"
        with self._lock:
            if storage.is_s3(self.uri):
                self._lines.append(line)
                if len(self._lines) >= self.flush_lines:
                    self._flush_locked()
            else:
                with open(self.uri, "a", encoding="utf-8") as f:
                    f.write(line)

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if storage.is_s3(self.uri) and self._lines:
            storage.write_bytes(self.part_uri(self._parts), "".join(self._lines).encode("utf-8"))
            self._parts += 1
            self._lines = []

    def close(self) -> None:
        self.flush()

    def __getstate__(self) -> dict[str, Any]:
        return {"uri": self.uri, "flush_lines": self.flush_lines}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["uri"], state.get("flush_lines", 1000))  # type: ignore[misc]
