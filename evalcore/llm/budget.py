"""Shared rate budget per endpoint: token buckets for requests and tokens per period, plus AIMD concurrency.

Both buckets refill at ``limit / (period + burst_s + margin_s)`` per second and hold at most
``burst_s`` seconds of refill, so any window of ``period`` seconds grants at most
``limit * (period + burst_s) / (period + burst_s + margin_s)`` < ``limit``; ``margin_s`` of
slack absorbs the delay between a grant and the request's arrival at the server.

``acquire(n_tokens)`` returns a :class:`Lease` or the seconds to wait before trying again;
``settle(lease, actual_tokens)`` corrects the token reservation with the real ``usage``;
``penalize(retry_after_s)`` (on a 429) pauses everyone and halves concurrency. The same
interface runs in-process (:class:`TokenBucketBudget`) or in one Ray actor shared by many
workers (:class:`RayBudget`).
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol


@dataclass(frozen=True)
class Lease:
    """A grant for one request reserving ``tokens`` tokens; settle it exactly once."""

    id: int
    tokens: int


class Budget(Protocol):
    def acquire(self, n_tokens: int) -> Lease | float: ...
    def settle(self, lease: Lease, actual_tokens: int | None) -> None: ...
    def penalize(self, retry_after_s: float) -> None: ...
    def pause(self, seconds: float) -> None: ...
    def stats(self) -> dict[str, Any]: ...


def estimate_tokens(messages: list[dict], max_tokens: int) -> int:
    """Conservative estimate of a request's tokens: ~3 characters a token + overhead + max_tokens."""
    chars = sum(len(str(m.get("content", ""))) for m in messages)
    return math.ceil(chars / 3) + 8 * len(messages) + max_tokens


class _Bucket:
    def __init__(self, limit: float, period_s: float, burst_s: float, margin_s: float, now: float) -> None:
        self.rate = limit / (period_s + burst_s + margin_s)
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self.t = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.t) * self.rate)
        self.t = now

    def wait_for(self, n: float) -> float:
        """Seconds until ``n`` can be taken (a request larger than the bucket needs a full bucket)."""
        need = min(n, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate


class TokenBucketBudget:
    """In-process budget (thread-safe). See the module docstring."""

    def __init__(
        self,
        rpm: int,
        tpm: int,
        period_s: float = 60.0,
        burst_s: float = 1.0,
        margin_s: float = 1.0,
        max_concurrency: int = 32,
        lease_ttl_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        now = clock()
        self._req = _Bucket(rpm, period_s, burst_s, margin_s, now)
        self._tok = _Bucket(tpm, period_s, burst_s, margin_s, now)
        self._lock = threading.Lock()
        self.max_concurrency = max_concurrency
        self.concurrency = float(max_concurrency)
        self._leases: dict[int, tuple[Lease, float]] = {}  # id -> (lease, expiry)
        self._next_id = 0
        self._ttl = lease_ttl_s
        self._paused_until = 0.0
        self._counts = {"granted": 0, "settled": 0, "penalties": 0, "expired": 0}

    def acquire(self, n_tokens: int) -> Lease | float:
        with self._lock:
            now = self._clock()
            if now < self._paused_until:
                return self._paused_until - now
            for lid in [i for i, (_, exp) in self._leases.items() if exp < now]:
                del self._leases[lid]  # holder died without settling
                self._counts["expired"] += 1
            if len(self._leases) >= int(self.concurrency):
                return 0.02  # wait for a slot to free
            self._req.refill(now)
            self._tok.refill(now)
            wait = max(self._req.wait_for(1), self._tok.wait_for(n_tokens))
            if wait > 0:
                return wait
            self._req.level -= 1
            self._tok.level -= n_tokens
            self._next_id += 1
            lease = Lease(self._next_id, n_tokens)
            self._leases[lease.id] = (lease, now + self._ttl)
            self._counts["granted"] += 1
            return lease

    def settle(self, lease: Lease, actual_tokens: int | None) -> None:
        """Release the slot; ``actual_tokens`` None (failed call) keeps the whole reservation."""
        with self._lock:
            if self._leases.pop(lease.id, None) is None:
                return
            self._counts["settled"] += 1
            if actual_tokens is not None:
                self._tok.refill(self._clock())
                self._tok.level = min(self._tok.capacity, self._tok.level + lease.tokens - actual_tokens)
                self.concurrency = min(self.max_concurrency, self.concurrency + 1.0 / self.concurrency)

    def penalize(self, retry_after_s: float) -> None:
        """A 429: pause everyone for ``retry_after_s``, empty the buckets, halve concurrency once per pause."""
        with self._lock:
            now = self._clock()
            self._counts["penalties"] += 1
            if now >= self._paused_until:
                self.concurrency = max(1.0, self.concurrency / 2)
            self._paused_until = max(self._paused_until, now + max(0.0, retry_after_s))
            self._req.refill(now)
            self._req.level = min(self._req.level, 0.0)

    def pause(self, seconds: float) -> None:
        """Pause everyone (e.g. ``x-ratelimit-remaining-requests: 0``) without changing concurrency."""
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {**self._counts, "concurrency": self.concurrency, "in_flight": len(self._leases),
                    "request_rate_per_s": self._req.rate, "token_rate_per_s": self._tok.rate}


class RayBudget:
    """The same interface backed by one named Ray actor, so many Ray workers share one budget.

    Picklable (holds the actor handle, its name and settings); pass it to actors or re-open it by
    ``name``. The actor lives while the process that created it holds it: a pipeline run creates its
    budgets in the driver (:func:`evalcore.pipeline.llm_resources.hold_budgets`). Should the creator
    drop it anyway (e.g. a Ray worker that created it exits), the next call opens it again.
    """

    def __init__(self, name: str, **budget_kwargs: Any) -> None:
        self.name = name
        self._kwargs = budget_kwargs
        self._actor = self._open()

    def _open(self) -> Any:
        import ray

        actor_cls = ray.remote(num_cpus=0, max_restarts=-1)(TokenBucketBudget)
        return actor_cls.options(name=self.name, get_if_exists=True, lifetime=None).remote(**self._kwargs)

    def _call(self, method: str, *args: Any) -> Any:
        import ray

        try:
            return ray.get(getattr(self._actor, method).remote(*args))
        except ray.exceptions.ActorDiedError:
            # a handle found by name does not keep the actor alive: its creator dropped it
            self._actor = self._open()
            return ray.get(getattr(self._actor, method).remote(*args))

    def acquire(self, n_tokens: int) -> Lease | float:
        return self._call("acquire", n_tokens)

    def settle(self, lease: Lease, actual_tokens: int | None) -> None:
        self._call("settle", lease, actual_tokens)

    def penalize(self, retry_after_s: float) -> None:
        self._call("penalize", retry_after_s)

    def pause(self, seconds: float) -> None:
        self._call("pause", seconds)

    def stats(self) -> dict[str, Any]:
        return self._call("stats")

    def kill(self) -> None:
        import ray

        ray.kill(self._actor)


def endpoint_budget(name: str | None, rpm: int, tpm: int) -> Budget:
    """The named :class:`RayBudget` every Ray worker shares, else a budget of this process alone."""
    return RayBudget(name, rpm=rpm, tpm=tpm) if name else TokenBucketBudget(rpm, tpm)


def acquire_blocking(budget: Budget, n_tokens: int, max_wait_s: float, rng: random.Random | None = None) -> Lease | None:
    """Poll ``budget`` until it grants a lease; None after ``max_wait_s`` (bounded loop)."""
    rng = rng or random.Random()
    deadline = time.monotonic() + max_wait_s
    while True:
        got = budget.acquire(n_tokens)
        if isinstance(got, Lease):
            return got
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(left, float(got) + rng.uniform(0, 0.005), 1.0))
