"""Single flight: identical requests (one cache key) in flight at the same time make one call.

The first caller of a key *leads*: it makes the call and then :meth:`finish`-es the key with its
outcome (a completion dict, error included). Every caller of the same key meanwhile *follows*: it
waits for that outcome and returns it instead of calling. Once finished, the key is free again (a
later identical request finds the response cache, or, after an error, calls on its own).

* :class:`LocalFlights` — the threads of one process.
* :class:`RayFlights` — every thread of every Ray worker and actor of a run, through one named
  async actor. The driver of a run creates it and holds it while the run lasts (like the named rate
  budgets, :func:`evalcore.pipeline.llm_resources.hold_budgets`); workers find it by name.

A follower waits at most ``wait_s`` seconds; a leader that died without finishing (its worker was
killed) therefore costs its followers that wait, after which they lead themselves. Waiting is
bounded, never a hang.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol

LEAD = "lead"


class Flights(Protocol):
    def claim(self, key: str, wait_s: float) -> Any: ...
    def finish(self, key: str, outcome: dict[str, Any]) -> None: ...


class LocalFlights:
    """Single flight among the threads of this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[threading.Event, list[Any]]] = {}

    def claim(self, key: str, wait_s: float) -> Any:
        """:data:`LEAD` (make the call, then :meth:`finish`) or the leader's outcome."""
        with self._lock:
            slot = self._open.get(key)
            if slot is None:
                self._open[key] = (threading.Event(), [])
                return LEAD
        event, box = slot
        if event.wait(wait_s) and box:
            return box[0]
        with self._lock:  # the leader never finished: take over
            if self._open.get(key) is slot:
                self._open[key] = (threading.Event(), [])
        return LEAD

    def finish(self, key: str, outcome: dict[str, Any]) -> None:
        with self._lock:
            slot = self._open.pop(key, None)
        if slot is not None:
            slot[1].append(outcome)
            slot[0].set()


class _FlightActor:
    """The Ray actor behind :class:`RayFlights` (async: many followers wait at once)."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[asyncio.Event, list[Any]]] = {}
        self.led = 0
        self.followed = 0

    async def claim(self, key: str, wait_s: float) -> Any:
        slot = self._open.get(key)
        if slot is None:
            self._open[key] = (asyncio.Event(), [])
            self.led += 1
            return LEAD
        event, box = slot
        try:
            await asyncio.wait_for(event.wait(), timeout=wait_s)
        except asyncio.TimeoutError:
            pass
        if box:
            self.followed += 1
            return box[0]
        if self._open.get(key) is slot:  # the leader never finished: take over
            self._open[key] = (asyncio.Event(), [])
        self.led += 1
        return LEAD

    async def finish(self, key: str, outcome: dict[str, Any]) -> None:
        slot = self._open.pop(key, None)
        if slot is not None:
            slot[1].append(outcome)
            slot[0].set()

    async def stats(self) -> dict[str, int]:
        return {"led": self.led, "followed": self.followed, "open": len(self._open)}


class RayFlights:
    """Single flight across the Ray workers of a run: one named actor (picklable: holds only its name)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._actor: Any = None

    def open(self) -> "RayFlights":
        """Create the actor if it does not exist yet (the run's driver does this and keeps the object)."""
        import ray

        self._actor = ray.remote(num_cpus=0, max_concurrency=1000)(_FlightActor).options(
            name=self.name, get_if_exists=True, lifetime=None).remote()
        return self

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["name"])  # type: ignore[misc]

    def _handle(self) -> Any:
        if self._actor is None:
            import ray

            self._actor = ray.get_actor(self.name)
        return self._actor

    def claim(self, key: str, wait_s: float) -> Any:
        import ray

        try:
            return ray.get(self._handle().claim.remote(key, wait_s), timeout=wait_s + 30)
        except Exception:  # noqa: BLE001 - no actor (gone, or never created): no single flight, just call
            return LEAD

    def finish(self, key: str, outcome: dict[str, Any]) -> None:
        import ray

        try:
            ray.get(self._handle().finish.remote(key, outcome), timeout=30)
        except Exception:  # noqa: BLE001 - followers time out and lead themselves
            pass

    def stats(self) -> dict[str, int]:
        import ray

        return ray.get(self._handle().stats.remote())


_OPEN: dict[tuple[str, str], Any] = {}
_OPEN_LOCK = threading.Lock()


def flights_for(name: str | None) -> Flights:
    """The run's :class:`RayFlights` when ``name`` is given (and Ray is up), else this process's flights."""
    on_ray = False
    if name:
        try:
            import ray

            on_ray = ray.is_initialized()
        except ImportError:
            pass
    with _OPEN_LOCK:
        if on_ray:
            return _OPEN.setdefault(("ray", name or ""), RayFlights(name or ""))
        return _OPEN.setdefault(("local", name or ""), LocalFlights())
