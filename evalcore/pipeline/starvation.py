"""How long each model's actors waited for input while work remained, and which upstream operator held them.

:class:`StarvationWatch` is a Ray Data backpressure policy that never holds anything back: the executor asks it,
once per scheduling step and per operator, how many output bytes the operator may read
(``max_task_output_bytes_to_read``), and it answers "no limit" after looking at the operator. For an actor-pool
operator (a model's, ``MapBatches(model:<name>)``) it counts the actors that are running but have no task while
the operator's input queue is empty and an operator upstream has not finished: those actors are *starved*, and
each step's starved actor-seconds are added up (the time since the previous step, times the idle actors then).

The watch also says why: it walks up from the model towards the read, to the first operator that is running tasks
(the model waits on its output: e.g. ``decode``), or that has input waiting but runs nothing, or runs less than it
could, because a backpressure policy holds it back (its name: e.g. ``ResourceBudget``) or no CPU is free. The
seconds are charged to that operator, and separately the seconds it was held back while the model waited. Idle
actors while the model's own input queue holds blocks are charged to the model itself (a policy held its
submission back, or the executor had not yet handed them the waiting batch: ``scheduler``).

Counting starts with the pool's first task (the actors' start-up is the model stage's own first output, in the
profile) and ends when nothing upstream remains. The run reads the tallies after the execution
(:meth:`evalcore.pipeline.raydata.Stream.operators`). Everything it reads of Ray Data's internals is in
:mod:`evalcore.core.ray_internals`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from evalcore.core.ray_internals import (ENABLED_BACKPRESSURE_POLICIES, ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY,
                                    BackpressurePolicy, actor_counts, executor_policies, held_by, policy_topology,
                                    queued_input, queued_output)


@dataclass
class Starved:
    """One actor-pool operator's starvation, as the watch counted it."""

    seconds: float = 0.0  #: actor-seconds its actors waited for input while work remained upstream
    by: dict[str, float] = field(default_factory=dict)  #: upstream operator (Ray Data's name) → seconds it held
    held: dict[str, float] = field(default_factory=dict)  #: "<operator> by <policy>" → seconds of it held back


class StarvationWatch(BackpressurePolicy):
    """Counts each actor pool's starved actor-seconds and the upstream operator holding it (never backpressures)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.starved: dict[str, Starved] = {}  #: operator name → its tally
        self._last: dict[Any, tuple[float, int, str | None, str | None]] = {}  # op → (at, idle, cause, held)
        self._started: set[Any] = set()

    @property
    def name(self) -> str:
        return "StarvationWatch"

    def max_task_output_bytes_to_read(self, op: Any) -> int | None:
        try:
            self._observe(op)
        except Exception:  # noqa: BLE001 - a watch must never break the run it watches
            pass
        return None

    def _observe(self, op: Any) -> None:
        counts = actor_counts(op)
        if counts is None:
            return
        now = time.perf_counter()
        last = self._last.get(op)
        if last is not None and last[1] > 0:  # the state seen at the last step held until now
            at, idle, cause, held = last
            tally = self.starved.setdefault(op.name, Starved())
            dt = (now - at) * idle
            tally.seconds += dt
            if cause is not None:
                tally.by[cause] = tally.by.get(cause, 0.0) + dt
            if held is not None:
                tally.held[held] = tally.held.get(held, 0.0) + dt
        running, working = counts
        if working > 0:
            self._started.add(op)
        idle, cause, held = 0, None, None
        topology = policy_topology(self)
        if op in self._started and running > working:
            if queued_input(topology, op) > 0:  # input waiting, not handed to the idle actors
                idle, cause = running - working, op.name
                held = f"{op.name} by {held_by(op) or 'scheduler'}"
            elif remains_upstream(topology, op):
                idle = running - working
                cause, held = holder(topology, op)
        self._last[op] = (now, idle, cause, held)


def remains_upstream(topology: dict, op: Any) -> bool:
    """Whether an operator feeding ``op`` still has work or output to hand on."""
    return any(not d.has_completed() or queued_output(topology, d) > 0 for d in op.input_dependencies)


def holder(topology: dict, op: Any) -> tuple[str | None, str | None]:
    """(the upstream operator ``op`` waits on, "<it> by <policy>" when a policy or the CPUs hold it back): the
    first operator upstream that runs tasks or has input waiting; one that is idle with nothing to do passes the
    wait on to its own inputs."""
    seen: set[int] = set()
    u = next((d for d in op.input_dependencies if not d.has_completed()), None) or \
        next(iter(op.input_dependencies), None)
    while u is not None and id(u) not in seen:
        seen.add(id(u))
        waiting = queued_input(topology, u) > 0 if u in topology else False
        policy = held_by(u)
        if waiting and policy is not None:
            return u.name, f"{u.name} by {policy}"
        if u.num_active_tasks() > 0:
            return u.name, None
        if waiting:  # input waiting, nothing running, no policy: the executor found no free CPU for it
            return u.name, f"{u.name} by CPUs"
        ups = list(u.input_dependencies)
        if not ups:
            return u.name, None
        u = next((d for d in ups if not d.has_completed()), ups[0])
    return None, None


def install(context: Any) -> None:
    """Enable :class:`StarvationWatch` on a Ray Data ``DataContext`` (every later execution gets one of its own)."""
    policies = list(context.get_config(ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, None) or ENABLED_BACKPRESSURE_POLICIES)
    if StarvationWatch not in policies:
        policies.append(StarvationWatch)
    context.set_config(ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, policies)


def tallies(executor: Any) -> dict[str, Starved]:
    """Operator name → its :class:`Starved` tally, from the watch an executor ran with (none: empty)."""
    out: dict[str, Starved] = {}
    for p in executor_policies(executor):
        if isinstance(p, StarvationWatch):
            out.update(p.starved)
    return out
