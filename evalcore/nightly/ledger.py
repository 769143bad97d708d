"""The ledger: one JSON record per checkpoint in the object store, plus leases.

``<root>/ledger/<series>/<checkpoint>.json`` says what happened to a checkpoint (its URI, content
identity, run root, suite fingerprint, status ``running`` / ``finished`` / ``failed`` / ``waiting`` with a
reason, attempts, timestamps). One object per checkpoint, each written whole (atomic: a local temp file
renamed, or one S3 PUT), so two nightlies never lose each other's rows.

``<root>/ledger/<series>/<checkpoint>.lease`` claims a checkpoint: a nightly writes its own lease, waits
``settle`` seconds, reads it back and evaluates only when the lease is still its own (a second nightly
that wrote in between wins or loses as a whole; the loser skips the checkpoint). A lease expires
``lease_seconds`` after its last renewal, so a killed nightly never blocks a checkpoint for good; it is
renewed while the evaluation runs, so a long one is not taken over. Clock skew between writers only
shortens or lengthens an expiry; keep ``lease_seconds`` well above the skew.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from evalcore import storage

VERSION = 1
STATUSES = ("running", "finished", "failed", "waiting")


class LedgerError(RuntimeError):
    """A ledger file that is corrupt or written by a newer evalcore; names the file."""


def now() -> float:
    return time.time()


def iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Ledger:
    """The records and leases under ``<root>/ledger/``."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.dir = storage.join(root, "ledger")

    def path(self, series: str, checkpoint: str, suffix: str = ".json") -> str:
        return storage.join(self.dir, series, checkpoint + suffix)

    def _read(self, uri: str) -> dict | None:
        try:
            raw = storage.read_bytes(uri)
        except FileNotFoundError:
            return None
        except OSError as e:
            if "NoSuchKey" in str(e) or "does not exist" in str(e).lower():
                return None
            raise
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise LedgerError(f"ledger file {uri} is corrupt (not JSON: {e}); delete it to evaluate again") from None
        if not isinstance(data, dict) or not isinstance(data.get("version"), int):
            raise LedgerError(f"ledger file {uri} is corrupt (no version); delete it to evaluate again")
        if data["version"] > VERSION:
            raise LedgerError(f"ledger file {uri} has version {data['version']}, newer than this evalcore's "
                              f"{VERSION}: upgrade evalcore")
        return data

    def get(self, series: str, checkpoint: str) -> dict | None:
        """The checkpoint's record, or None."""
        return self._read(self.path(series, checkpoint))

    def put(self, record: dict) -> dict:
        """Write a record whole (``updated`` stamped)."""
        record = {**record, "version": VERSION, "updated": iso(now())}
        storage.write_text(self.path(record["series"], record["checkpoint"]), json.dumps(record, indent=1,
                                                                                         default=str))
        return record

    def records(self) -> list[dict]:
        """Every record in the ledger."""
        return [r for uri in storage.list_files(self.dir, ".json") if (r := self._read(uri)) is not None]

    def table(self) -> pa.Table:
        """The records as a table (``ledger.parquet``, a view for people; the JSON records are the truth)."""
        cols = ("series", "checkpoint", "uri", "status", "reason", "attempts", "identity", "run_root",
                "suite_fingerprint", "started", "finished", "updated")
        rows = [{c: (json.dumps(r.get(c)) if c == "identity" else r.get(c)) for c in cols} for r in self.records()]
        schema = pa.schema([(c, pa.int64() if c == "attempts" else pa.string()) for c in cols])
        return pa.Table.from_pylist(rows, schema=schema)

    # ------------------------------------------------------------------ leases

    def claim(self, series: str, checkpoint: str, owner: str, lease_s: float, settle_s: float) -> bool:
        """Take the checkpoint's lease for ``owner``: False when another owner holds an unexpired one, or wrote
        one while we settled."""
        uri = self.path(series, checkpoint, ".lease")
        held = self._read(uri)
        if held is not None and held.get("owner") != owner and float(held.get("expires", 0)) > now():
            return False
        self._write_lease(uri, owner, lease_s)
        time.sleep(settle_s)
        back = self._read(uri)
        return back is not None and back.get("owner") == owner

    def _write_lease(self, uri: str, owner: str, lease_s: float) -> None:
        t = now()
        storage.write_text(uri, json.dumps({"version": VERSION, "owner": owner, "written": t, "expires": t + lease_s}))

    def release(self, series: str, checkpoint: str, owner: str) -> None:
        """Drop the lease if it is still ours."""
        uri = self.path(series, checkpoint, ".lease")
        held = self._read(uri)
        if held is not None and held.get("owner") == owner:
            storage.delete(uri)

    def holding(self, series: str, checkpoint: str, owner: str, lease_s: float) -> "Renewal":
        """A context that renews the lease every ``lease_s``/3 seconds while the evaluation runs."""
        return Renewal(self, self.path(series, checkpoint, ".lease"), owner, lease_s)


@dataclass
class Renewal:
    ledger: Ledger
    uri: str
    owner: str
    lease_s: float

    def __enter__(self) -> "Renewal":
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="evalcore-lease")
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3.0):
            try:
                self.ledger._write_lease(self.uri, self.owner, self.lease_s)
            except OSError:
                pass  # the next renewal tries again; the lease lasts lease_s

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def new_owner() -> str:
    """A unique id for one nightly process."""
    import os
    import socket

    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
