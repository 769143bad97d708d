"""A Ray Data dataset's output as block references, and its operators' own stats, as the run reads them.

What this reads of Ray Data is private API (Ray 2.60; ray is pinned), all of it through :mod:`evalcore.core.ray_internals`:
the stream of ``RefBundle`` s and the executor behind it (whose final stats outlive the iteration), a bundle's
blocks and slices, and the executor's stats per operator (the rows and task times of every output block, on the
worker's ``time.perf_counter`` clock, and the operator's runtime metrics). ``tests/test_ray_internals.py`` checks
each name against the installed Ray; every end-to-end run test checks the figures (``tests/test_pipeline_e2e.py``
checks the profile's figures against the run's counts).

Block times are each node's monotonic clock; :func:`node_offsets` measures, per node, the offset to wall time, so
that a multi-node cluster's operators line up with the driver's clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from evalcore.core import ray_internals


@dataclass
class Bundle:
    """One output bundle of the stream: its blocks' references, each block's row range (None: the whole block),
    and its rows. The driver holds only these, never the rows."""

    refs: list[Any]
    ranges: list[tuple[int, int] | None]
    rows: int


@dataclass
class Operator:
    """One Ray Data operator of an executed dataset, as its own stats record it."""

    name: str  #: Ray Data's name, e.g. ``MapBatches(model:listener)``, ``MapBatches(judge)->MapBatches(score)``
    blocks: int = 0
    rows_in: int | None = None
    rows_out: int = 0
    busy_s: float = 0.0  #: the sum of its tasks' time per output block (an actor's or a task's)
    held_s: float = 0.0  #: time a backpressure policy held its task submission back (it had input waiting)
    #: its tasks' time with output ready that the executor did not read (Ray Data's output backpressure: the budget
    #: of the stages after it was spent), summed over tasks
    output_held_s: float = 0.0
    spans: list[tuple[str, float, float]] = field(default_factory=list)  #: (node, start, end) per output block
    tasks: int = 0
    #: actor-seconds its actors waited for input while work remained upstream (:mod:`evalcore.pipeline.starvation`)
    starved_s: float = 0.0
    starved_by: dict[str, float] = field(default_factory=dict)  #: upstream operator's name → seconds it held
    starved_held: dict[str, float] = field(default_factory=dict)  #: "<operator> by <policy>" → seconds held back


class Stream:
    """One execution of a Ray Data dataset, consumed as block references (:meth:`bundles`); after it, the stats of
    its operators (:meth:`operators`)."""

    def __init__(self, ds: Any) -> None:
        self._ds = ds
        self._executor: Any = None

    def bundles(self) -> Iterator[Bundle]:
        """The dataset's output bundles as they complete (the executor streams behind this iterator)."""
        it, self._executor = ray_internals.execute(self._ds)
        for b in it:
            yield Bundle(*ray_internals.bundle_blocks(b))

    def operators(self) -> list[Operator]:
        """Every operator of the execution (none when it did not run), from the executor's final stats."""
        if self._executor is None:
            return []
        out: list[Operator] = []
        for s in ray_internals.operator_stats(self._executor):
            op = Operator(name=s.name, rows_in=s.rows_in, held_s=s.held_s, tasks=s.tasks, output_held_s=s.output_held_s)
            for b in s.blocks:
                op.blocks += 1
                op.rows_out += b.rows
                op.busy_s += b.busy_s
                if b.span is not None:
                    op.spans.append(b.span)
            out.append(op)
        from evalcore.pipeline.starvation import tallies  # heavy: imports ray.data at its top

        starved = tallies(self._executor)
        for op in out:
            t = starved.get(op.name)
            if t is not None:
                op.starved_s, op.starved_by, op.starved_held = t.seconds, dict(t.by), dict(t.held)
        return out


def node_offsets(nodes: set[str]) -> dict[str, float]:
    """node id → wall time minus ``time.perf_counter()`` on that node (the driver's own node measured here; another
    by a task pinned to it; a node that does not answer within 10 s is left out)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    out = {here: time.time() - time.perf_counter()}
    others = sorted(n for n in nodes if n != here)
    if not others:
        return out

    @ray.remote(num_cpus=0)
    def offset() -> float:
        return time.time() - time.perf_counter()

    refs = {n: offset.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote()
            for n in others}
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=10.0)
    for n, ref in refs.items():
        if ref in ready:
            try:
                out[n] = float(ray.get(ref))
            except Exception:  # noqa: BLE001 - a node gone since: its blocks keep their rows, lose their times
                pass
    return out
