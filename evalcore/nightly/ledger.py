"""The ledger: one JSON record per checkpoint in the object store, plus leases.

``<root>/ledger/<series>/<checkpoint>.json`` says what happened to a checkpoint: a
:class:`~evalcore.core.nightly_outcome.LedgerRecord` (its URI, content identity, run root, suite fingerprint, status
``running`` / ``finished`` / ``failed`` / ``waiting`` with a reason, attempts, timestamps). One object per
checkpoint, each written whole (atomic: a local temp file renamed, or one S3 PUT), so two nightlies never lose each
other's rows.

``<root>/ledger/<series>/<checkpoint>.lease`` claims a checkpoint (:mod:`evalcore.nightly.lease`: a
conditional create, taken over by compare-and-swap once expired). A record written under a lease carries
its token and is a compare-and-swap too, refused once the lease is no longer the writer's.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa

from evalcore.core import storage, storage_conditional as cond
from evalcore.nightly.lease import Lease, LeaseLost, Leases, Renewal
from evalcore.core.nightly_outcome import LedgerRecord

VERSION = 1


class LedgerError(RuntimeError):
    """A ledger file that is corrupt or written by a newer evalcore; names the file."""


def now() -> float:
    return time.time()


def iso(t: float | None) -> str | None:
    return None if t is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Ledger:
    """The records and leases under ``<root>/ledger/``."""

    def __init__(self, root: str, leases: Leases | None = None) -> None:
        self.root = root
        self.dir = storage.join(root, "ledger")
        self.leases = leases or Leases()

    def path(self, series: str, checkpoint: str, suffix: str = ".json") -> str:
        return storage.join(self.dir, series, checkpoint + suffix)

    def _read(self, uri: str) -> LedgerRecord | None:
        # one GET, as the record is written: another nightly's write that lands meanwhile is read whole, old or new
        # (pyarrow's S3 reader sizes an object first and then reads that many bytes, so a record replaced by a
        # longer one in between came back cut, "corrupt")
        got = cond.read(uri)
        if got is None:
            return None
        try:
            data = json.loads(got.data)
        except ValueError as e:
            raise LedgerError(f"ledger file {uri} is corrupt (not JSON: {e}); delete it to evaluate again") from None
        if not isinstance(data, dict) or not isinstance(data.get("version"), int):
            raise LedgerError(f"ledger file {uri} is corrupt (no version); delete it to evaluate again")
        if data["version"] > VERSION:
            raise LedgerError(f"ledger file {uri} has version {data['version']}, newer than this evalcore's "
                              f"{VERSION}: upgrade evalcore")
        try:
            return LedgerRecord.from_json(data)
        except (TypeError, ValueError) as e:
            raise LedgerError(f"ledger file {uri} is corrupt ({e}); delete it to evaluate again") from None

    def get(self, series: str, checkpoint: str) -> LedgerRecord | None:
        """The checkpoint's record, or None."""
        return self._read(self.path(series, checkpoint))

    def put(self, record: LedgerRecord, lease: Lease | None = None) -> LedgerRecord:
        """Write a record whole (``updated`` stamped). Under a ``lease``: only while the lease is still the
        writer's, as a compare-and-swap on the record read just before (raises :class:`LeaseLost`)."""
        record = record.but(updated=iso(now()), lease_token=lease.token if lease is not None else record.lease_token)
        uri = self.path(record.series, record.checkpoint)
        body = json.dumps({**record.as_json(), "version": VERSION}, indent=1, default=str).encode()
        if lease is None:
            storage.write_bytes(uri, body)
            return record
        for _ in range(5):
            cur = cond.read(uri)
            if not self.leases.holds(lease):
                raise LeaseLost(f"{uri}: the lease was taken over by another nightly; this write is refused")
            if self.leases.fallback is not None:
                storage.write_bytes(uri, body)
                return record
            if (cond.create(uri, body) if cur is None else cond.replace(uri, body, cur.version)) is not None:
                return record
        raise LeaseLost(f"{uri}: the record kept changing under this nightly's writes")

    def records(self) -> list[LedgerRecord]:
        """Every record in the ledger."""
        return [r for uri in storage.list_files(self.dir, ".json") if (r := self._read(uri)) is not None]

    def table(self) -> pa.Table:
        """The records as a table (``ledger.parquet``, a view for people; the JSON records are the truth)."""
        cols = ("series", "checkpoint", "uri", "status", "reason", "attempts", "identity", "run_root",
                "suite_fingerprint", "started", "finished", "updated")
        rows = [{c: (json.dumps(d[c]) if c == "identity" else d[c]) for c in cols}
                for d in (r.as_json() for r in self.records())]
        schema = pa.schema([(c, pa.int64() if c == "attempts" else pa.string()) for c in cols])
        return pa.Table.from_pylist(rows, schema=schema)

    # ------------------------------------------------------------------ leases (evalcore.nightly.lease)

    def lease_path(self, series: str, checkpoint: str) -> str:
        return self.path(series, checkpoint, ".lease")

    def claim(self, series: str, checkpoint: str, owner: str, lease_s: float) -> Lease | None:
        """The checkpoint's lease for ``owner``, or None when another nightly holds it or won the race."""
        return self.leases.claim(self.lease_path(series, checkpoint), owner, lease_s)

    def release(self, lease: Lease) -> None:
        self.leases.release(lease)

    def holding(self, lease: Lease) -> Renewal:
        """A context that renews ``lease`` while the evaluation runs."""
        return self.leases.holding(lease)
