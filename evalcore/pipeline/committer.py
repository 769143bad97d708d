"""The commit stage: the stream's judged and scored blocks committed as shards by Ray tasks the driver starts.

The driver takes the stream's output as block references (never the rows, :class:`evalcore.pipeline.raydata.Stream`)
and groups them: the first block is committed at once, then a group is committed once it holds ``shard_rows`` rows
or ``every_s`` seconds have passed since the last commit. Each group goes to a task (:func:`commit_blocks`) that
writes one shard (:func:`evalcore.pipeline.commit.commit_batch`) and answers a few tally rows. So the first
results are on storage as soon as the first block is scored, whatever the run's size, and a long run still
commits in shards of up to ``shard_rows`` rows.

Why not a Ray Data operator at the end of the graph (as before): Ray Data reserves the CPUs upstream first and
lends the last operators only what the earlier ones leave; on a small node, while the model stage ran, the commit
operator's budget was zero (its submissions held back by Ray Data's ``ResourceBudget`` policy) and nothing was
committed until the model stage ended, a silence that grew with the run (docs/pipeline.md). The tasks ask no
CPU (writing a shard waits on storage; at most ``in_flight`` run at once), so no reservation holds them back.

**On the driver's node.** Every commit task is pinned to the node the driver runs on: a local run root is the
driver's disk, which the cluster's other nodes do not see (a task there wrote its shard where no one would read
it), and the driver's node lives as long as the run. A block a lost node held is computed again by Ray (its
lineage) before the task that commits it starts. **Fenced.** The commit stage never leaves a commit behind: when
the stream fails, the tasks in flight are waited for (up to :data:`FENCE_S` seconds) before the error goes on, so
no commit writes after the driver has given up (a marker is written last and whole, or not at all:
:func:`evalcore.core.storage.write_bytes`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa

from evalcore.pipeline import commit
from evalcore.pipeline.raydata import Bundle

IN_FLIGHT = 2  # commit tasks running at once at most; the stream waits (Ray Data backpressure) beyond
FENCE_S = 120.0  # how long a failing stream waits for its commits in flight


def commit_blocks(root: str, attempt: int, s3: dict | None, read_timeout_s: float | None,
                  ranges: list[tuple[int, int] | None], *blocks: pa.Table) -> tuple[pa.Table, float, float]:
    """A commit task: ``blocks`` (their row ``ranges``) as one batch committed (:func:`commit.commit_batch`);
    returns its tally rows, the seconds it took and when it ended (wall time: nodes' clocks agree on it)."""
    t0 = time.perf_counter()
    parts = [b if r is None else b.slice(r[0], r[1] - r[0]) for b, r in zip(blocks, ranges)]
    batch = pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]
    out = commit.commit_batch(batch, root, attempt, s3, read_timeout_s)
    return out, time.perf_counter() - t0, time.time()


@dataclass
class CommitStage:
    """What the commit stage did, on the driver's clock (``time.perf_counter``)."""

    rows_in: int = 0
    shards: int = 0
    busy_s: float = 0.0
    started: float | None = None
    first_done: float | None = None
    last_done: float | None = None
    tasks: int = 0


@dataclass
class Committer:
    """Groups the stream's bundles and commits each group with a task (see the module docstring).

    ``submit(ranges, refs)`` starts one commit (default: :func:`commit_blocks` as a Ray task) and returns a
    reference; ``wait(refs, block)`` returns those done (one at least with ``block``; default: ``ray.wait``),
    ``get`` a result and ``settle(refs, timeout_s)`` waits for them all (the fence). The stage's times are the
    driver's ``time.perf_counter`` (a task's end, wall time, is taken onto it); ``clock`` paces the groups."""

    root: str
    attempt: int = 0
    s3: dict | None = None
    shard_rows: int = commit.WORKER_SHARD_ROWS[1]
    every_s: float = commit.COMMIT_SECONDS
    in_flight: int = IN_FLIGHT
    read_timeout_s: float | None = None  #: the run's read deadline (its S3 requests' too), with ``s3`` for the tasks
    clock: Callable[[], float] = time.perf_counter
    submit: Callable[[list, list], Any] | None = None
    wait: Callable[[list, bool], list] | None = None
    get: Callable[[Any], tuple[pa.Table, float, float]] | None = None
    settle: Callable[[list, float], Any] | None = None  #: waits for every ref given, up to a timeout (default: ray.wait)
    stage: CommitStage = field(default_factory=CommitStage)

    def __post_init__(self) -> None:
        self._wall_offset = time.time() - time.perf_counter()
        if self.submit is None:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
            task = ray.remote(num_cpus=0, max_retries=3, scheduling_strategy=here)(commit_blocks)
            self.submit = lambda ranges, refs: task.remote(self.root, self.attempt, self.s3, self.read_timeout_s,
                                                                ranges, *refs)
            self.wait = lambda refs, block: ray.wait(refs, num_returns=1 if block else len(refs),
                                                     timeout=None if block else 0.0)[0]
            self.get = ray.get
            self.settle = lambda refs, timeout_s: ray.wait(refs, num_returns=len(refs), timeout=timeout_s)

    def run(self, bundles: Iterable[Bundle]) -> Iterator[pa.Table]:
        """Commit ``bundles`` as they come; yields each commit's answer (tally rows, then the rows of requests
        whose chunks it did not hold whole) as it completes."""
        pending: list[Any] = []
        refs: list[Any] = []
        ranges: list[tuple[int, int] | None] = []
        rows = 0
        last: float | None = None
        try:
            for b in bundles:
                refs += b.refs
                ranges += b.ranges
                rows += b.rows
                yield from self._collect(pending, block=False)
                now = self.clock()
                if rows >= self.shard_rows or last is None or now - last >= self.every_s:
                    yield from self._start(pending, ranges, refs, rows, now)
                    refs, ranges, rows, last = [], [], 0, now
            if refs:
                yield from self._start(pending, ranges, refs, rows, self.clock())
            while pending:
                yield from self._collect(pending, block=True)
        except BaseException:
            self.fence(pending)
            raise

    def fence(self, pending: list, timeout_s: float = FENCE_S) -> None:
        """Wait (up to ``timeout_s``) for the commit tasks still in flight, whatever they end with: a failing run
        gives up only once none of its commits can write any more (their rows are counted by the next attempt)."""
        if pending and self.settle is not None:
            try:
                self.settle(list(pending), timeout_s)
            except Exception:  # noqa: BLE001 - a Ray already shut down has no task left to wait for
                pass

    def _start(self, pending: list, ranges: list, refs: list, rows: int, now: float) -> Iterator[pa.Table]:
        while len(pending) >= self.in_flight:
            yield from self._collect(pending, block=True)
        self.stage.started = now if self.stage.started is None else self.stage.started
        self.stage.rows_in += rows
        pending.append(self.submit(list(ranges), list(refs)))

    def _collect(self, pending: list, block: bool) -> Iterator[pa.Table]:
        if not pending:
            return
        for ref in self.wait(list(pending), block):
            pending.remove(ref)
            out, took, ended = self.get(ref)
            now = ended - self._wall_offset  # when it ended, on the driver's perf_counter clock
            self.stage.first_done = now if self.stage.first_done is None else self.stage.first_done
            self.stage.last_done = now
            self.stage.busy_s += took
            self.stage.tasks += 1
            self.stage.shards += len({k for k in out.column(commit.SHARD_COLUMN).to_pylist() if k is not None})
            yield out
