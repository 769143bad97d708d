"""Leases: which nightly evaluates a checkpoint, decided by the object store, not by timing.

``<root>/ledger/<series>/<checkpoint>.lease`` holds ``{owner, token, expires}``. On a store with conditional
writes (:mod:`evalcore.core.storage_conditional`; S3 servers that honour ``If-None-Match`` / ``If-Match``, and
every local filesystem):

* **claim** is a create-if-absent of the lease; when one exists and has expired (or was released), a
  compare-and-swap on the version read takes it over. Of any number of concurrent claimers exactly one
  write succeeds; the others see the condition fail and skip the checkpoint.
* **renewal** (every ``lease_seconds``/3 while the evaluation runs) is a compare-and-swap on the version
  this holder last wrote: if another nightly took the lease over (ours expired: a stalled or killed
  process), the swap fails and the lease is marked lost.
* **release** swaps in an expired lease (the object stays; the next claim takes it over).
* Each lease carries a fresh ``token``; ledger records written under it carry the token and are refused
  once the lease is no longer the holder's (:meth:`evalcore.nightly.ledger.Ledger.put`), so a stale
  holder's late write cannot overwrite the new holder's record.

A store that ignores the conditions is detected at start (:func:`evalcore.core.storage_conditional.probe`);
the nightly then falls back to *write, wait ``lease_settle_seconds``, read back* (not atomic: two claims
that straddle each other's wait can both win) and names the store and the fallback on the dashboard.
Clock skew between writers only shortens or lengthens an expiry; keep ``lease_seconds`` well above it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from evalcore.core import storage, storage_conditional as cond

log = logging.getLogger("evalcore")
VERSION = 1


class LeaseLost(RuntimeError):
    """The holder's lease was taken over (it had expired): its writes are refused."""


def now() -> float:
    return time.time()


@dataclass
class Lease:
    """A lease this process holds; ``version`` is what a compare-and-swap must find."""

    uri: str
    owner: str
    token: str
    lease_s: float
    version: str | None = None
    lost: bool = False

    def body(self, expires: float | None = None) -> bytes:
        t = now()
        return json.dumps({"version": VERSION, "owner": self.owner, "token": self.token, "written": t,
                           "expires": t + self.lease_s if expires is None else expires}).encode()


@dataclass
class Leases:
    """Claim, renew and release leases under one nightly root; ``fallback`` is why the store cannot do it
    atomically (None when it can)."""

    fallback: str | None = None
    settle_s: float = 2.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, root: str, settle_s: float) -> "Leases":
        """Probe the store under ``root`` once and choose conditional writes or the fallback."""
        why = cond.probe(storage.join(root, "ledger"))
        if why is not None:
            log.warning("nightly: %s does not support conditional writes (%s); leases fall back to write, wait "
                        "%.1f s, read back", root, why, settle_s)
        return cls(fallback=why, settle_s=settle_s)

    def read(self, uri: str) -> tuple[dict | None, str | None]:
        got = cond.read(uri)
        if got is None:
            return None, None
        try:
            data = json.loads(got.data)
        except ValueError:
            data = {}  # a corrupt lease counts as expired: the next claim takes it over
        return (data if isinstance(data, dict) else {}), got.version

    def claim(self, uri: str, owner: str, lease_s: float) -> Lease | None:
        """The lease for ``owner``, or None when another owner holds an unexpired one or won the race."""
        lease = Lease(uri, owner, uuid.uuid4().hex, lease_s)
        if self.fallback is not None:
            return self._claim_settled(lease)
        lease.version = cond.create(uri, lease.body())
        if lease.version is not None:
            return lease
        held, version = self.read(uri)
        if held is None or version is None:
            return None  # deleted under us: someone else is at it; skip tonight
        if held.get("owner") != owner and float(held.get("expires", 0)) > now():
            return None
        lease.version = cond.replace(uri, lease.body(), version)
        return lease if lease.version is not None else None

    def _claim_settled(self, lease: Lease) -> Lease | None:
        held, _ = self.read(lease.uri)
        if held is not None and held.get("owner") != lease.owner and float(held.get("expires", 0)) > now():
            return None
        storage.write_bytes(lease.uri, lease.body())
        time.sleep(self.settle_s)
        back, version = self.read(lease.uri)
        if back is None or back.get("token") != lease.token:
            return None
        lease.version = version
        return lease

    def holds(self, lease: Lease) -> bool:
        """Whether ``lease`` is still the checkpoint's current lease."""
        held, _ = self.read(lease.uri)
        return not lease.lost and held is not None and held.get("token") == lease.token

    def renew(self, lease: Lease) -> bool:
        """Extend ``lease``; False (and ``lease.lost``) when another nightly has taken it over."""
        with self._lock:
            if lease.lost:
                return False
            if self.fallback is not None:
                if not self.holds(lease):
                    lease.lost = True
                    return False
                storage.write_bytes(lease.uri, lease.body())
                return True
            new = cond.replace(lease.uri, lease.body(), lease.version or "")
            if new is None:
                lease.lost = not self.holds(lease)  # a failed swap with our token still there: retry next time
                return not lease.lost
            lease.version = new
            return True

    def release(self, lease: Lease) -> None:
        """Give the lease up (an expired lease stays in its place) if it is still ours."""
        with self._lock:
            if lease.lost:
                return
            if self.fallback is not None:
                if self.holds(lease):
                    storage.write_bytes(lease.uri, lease.body(expires=0.0))
            elif cond.replace(lease.uri, lease.body(expires=0.0), lease.version or "") is not None:
                lease.version = None
            lease.lost = True  # released: never written again

    def holding(self, lease: Lease) -> "Renewal":
        """A context that renews ``lease`` every ``lease_s``/3 seconds while the evaluation runs."""
        return Renewal(self, lease)


@dataclass
class Renewal:
    leases: Leases
    lease: Lease

    def __enter__(self) -> "Renewal":
        self._stop = threading.Event()
        self._thread = threading.Thread(target=storage.carried(self._loop), daemon=True, name="evalcore-lease")
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.lease.lease_s / 3.0):
            try:
                if not self.leases.renew(self.lease):
                    log.warning("nightly: the lease %s was taken over by another nightly; this one's ledger "
                                "writes are refused", self.lease.uri)
                    return
            except OSError:
                pass  # the next renewal tries again; the lease lasts lease_s

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def new_owner() -> str:
    """A unique id for one nightly process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
