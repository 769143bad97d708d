"""Every use of Ray's private API, in one module: what evalcore needs that Ray 2.60 offers no public way to do.

ray is pinned (pyproject: ``ray[data,default]==2.60.0``); ``tests/test_ray_internals.py`` imports this module and
checks each name and attribute below against the installed Ray, so an upgrade that moves one fails there, by
name, before any run does. Nothing else in evalcore imports ``ray._private`` or ``ray.data._internal``, names one
of their modules or reads a private attribute of a Ray object. Importing this module imports nothing of Ray: the
private classes are imported on first use (:func:`__getattr__`), the rest inside the functions that read them.

* A backpressure policy (:mod:`evalcore.pipeline.backpressure`): Ray Data's ``BackpressurePolicy`` base class and
  its setting, the union operator, an operator's remote args, and the topology's queued blocks.
* The resources of a streaming repartition (:func:`set_repartition_cpus`): Ray 2.60's ``repartition`` takes no
  resource arguments; the operator at the head of the dataset's logical plan gets them.
* What a starvation watch reads of the running topology (:mod:`evalcore.pipeline.starvation`): an actor pool's
  running and working actors, whether an operator is held back by a backpressure policy and by which, and the
  policies an executor ran with (:func:`executor_policies`), from which the run reads the watch's tallies.
* A dataset's execution as block references and its operators' own stats (:mod:`evalcore.pipeline.raydata`):
  ``Dataset._execute_to_iterator`` (:func:`execute`: the stream of ``RefBundle`` s and the executor behind it),
  a bundle's blocks and slices (:func:`bundle_blocks`), and the executor's ``DatasetStats`` chain
  (:func:`operator_stats`: per operator, its runtime metrics and each output block's rows and task times).
* The processes of the local node this driver started (:func:`node_pids`, :mod:`evalcore.core.cluster`).
* One line of Ray's C++ log that every restartable Ray Data actor pool prints (:func:`spend_restart_warning`).
* The notice Ray's token-authentication module logs on every new local cluster (:func:`drop_token_notice`,
  :mod:`evalcore.reports.console`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from ray.data._internal.execution.backpressure_policy import BackpressurePolicy

__all__ = ["ENABLED_BACKPRESSURE_POLICIES", "ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY", "BackpressurePolicy",
           "UnionOperator", "StreamingRepartition", "remote_args", "policy_context", "policy_topology",
           "queued_output", "queued_input", "actor_counts", "held_by", "executor_policies", "set_repartition_cpus",
           "execute", "bundle_blocks", "OutputBlock", "OperatorStats", "operator_stats", "OPERATOR_METRICS",
           "node_pids", "spend_restart_warning", "RESTART_WARNING", "TOKEN_NOTICE_LOGGER", "TOKEN_NOTICE",
           "drop_token_notice"]

#: Ray Data's private names this module hands out, by the module that holds them (imported on first use)
_LAZY = {"ENABLED_BACKPRESSURE_POLICIES": "backpressure_policy",
         "ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY": "backpressure_policy",
         "BackpressurePolicy": "backpressure_policy", "UnionOperator": "union_operator",
         "StreamingRepartition": "logical_operators"}


def __getattr__(name: str) -> Any:
    """Ray Data's private classes and settings of ``__all__``, imported on first use (ray.data takes seconds)."""
    where = _LAZY.get(name)
    if where == "backpressure_policy":
        from ray.data._internal.execution import backpressure_policy as module
    elif where == "union_operator":
        from ray.data._internal.execution.operators import union_operator as module
    elif where == "logical_operators":
        from ray.data._internal.logical import operators as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(module, name)


def remote_args(op: Any) -> dict[str, Any]:
    """The Ray remote args a physical operator's tasks or actors ask (``num_gpus``, ``resources``, …)."""
    return getattr(op, "_ray_remote_args", None) or {}


def policy_context(policy: BackpressurePolicy) -> Any:
    """The ``DataContext`` a backpressure policy was built with."""
    return policy._data_context


def policy_topology(policy: BackpressurePolicy) -> dict:
    """The running topology (physical operator → its state) a backpressure policy watches."""
    return policy._topology


def queued_output(topology: dict, op: Any) -> int:
    """Blocks waiting in ``op``'s output queue."""
    return topology[op].total_enqueued_output_blocks()


def queued_input(topology: dict, op: Any) -> int:
    """Blocks waiting in ``op``'s input queues."""
    return topology[op].total_enqueued_input_blocks()


def actor_counts(op: Any) -> tuple[int, int] | None:
    """(running actors, actors with a task in flight) of an actor-pool operator; None for a task operator."""
    pools = op.get_autoscaling_actor_pools() if hasattr(op, "get_autoscaling_actor_pools") else []
    if not pools:
        return None
    return (sum(p.num_running_actors() for p in pools), sum(p.num_active_actors() for p in pools))


def held_by(op: Any) -> str | None:
    """The backpressure policy holding ``op``'s task submission back now (its name), else None."""
    if not getattr(op, "_in_task_submission_backpressure", False):
        return None
    return getattr(op, "_task_submission_backpressure_policy", None) or "backpressure"


def executor_policies(executor: Any) -> list[Any]:
    """The backpressure policies a streaming executor ran with (they outlive its execution)."""
    return list(getattr(executor, "_backpressure_policies", None) or [])


def set_repartition_cpus(ds: Any, num_cpus: float) -> Any:
    """``ds``, whose last operation is a streaming repartition, with that operator's tasks asking ``num_cpus`` CPUs
    (the operator is frozen: its field is set as its own ``__init__`` sets it)."""
    from ray.data._internal.logical.operators import StreamingRepartition

    op = ds._logical_plan.dag
    if not isinstance(op, StreamingRepartition):
        raise TypeError(f"the dataset's last operator is {type(op).__name__}, not a StreamingRepartition "
                        "(a Ray upgrade builds repartitions otherwise; see evalcore/core/ray_internals.py)")
    object.__setattr__(op, "ray_remote_args", {"num_cpus": num_cpus})
    return ds


def execute(ds: Any) -> tuple[Iterator[Any], Any]:
    """Start ``ds``'s streaming execution: its output ``RefBundle`` s as they complete, and the executor behind them
    (None when Ray served the dataset from its cache), whose final stats outlive the iteration. The dataset does not
    keep the executor (``capture_executor=False``): the caller does, for :func:`operator_stats`."""
    it, _, executor = ds._execute_to_iterator(capture_executor=False)
    return it, executor


def bundle_blocks(bundle: Any) -> tuple[list[Any], list[tuple[int, int] | None], int]:
    """A ``RefBundle``'s block references, each block's row range (None: the whole block) and its rows."""
    slices = bundle.slices or [None] * len(bundle.blocks)
    ranges = [None if s is None else (int(s.start_offset), int(s.end_offset)) for s in slices]
    return [e.ref for e in bundle.blocks], ranges, int(bundle.num_rows() or 0)


#: the runtime metrics of an operator that :func:`operator_stats` reads (Ray Data's ``OpRuntimeMetrics`` names, as an
#: executor's stats record them in ``DatasetStats.extra_metrics``)
OPERATOR_METRICS = ("num_row_inputs_received", "task_submission_backpressure_time", "num_tasks_finished",
                    "task_output_backpressure_time_s")


@dataclass(frozen=True)
class OutputBlock:
    """One output block of an operator, as the executor's stats record it."""

    rows: int
    busy_s: float  #: its task's time for it (0 where Ray recorded none)
    #: (node, start, end) of that time on the node's ``time.perf_counter`` clock; None where Ray recorded none
    span: tuple[str, float, float] | None


@dataclass(frozen=True)
class OperatorStats:
    """One operator of an execution, as the executor's stats record it (:func:`operator_stats`)."""

    name: str  #: Ray Data's name, e.g. ``MapBatches(judge)->MapBatches(score)``
    rows_in: int | None  #: rows received (None where not recorded)
    held_s: float  #: time a backpressure policy held its task submission back
    tasks: int  #: its tasks finished
    output_held_s: float  #: its tasks' time with output ready that the executor did not read
    blocks: list[OutputBlock] = field(default_factory=list)


def _output_block(b: Any) -> OutputBlock:
    """An output block's ``BlockStats``: its rows and its ``BlockExecStats`` (task time, node, start and end)."""
    es = b.exec_stats
    if es is None:
        return OutputBlock(int(b.num_rows or 0), 0.0, None)
    span = None if es.start_time_s is None or es.end_time_s is None else \
        (str(es.node_id), float(es.start_time_s), float(es.end_time_s))
    return OutputBlock(int(b.num_rows or 0), float(es.wall_time_s or 0.0), span)


def operator_stats(executor: Any) -> list[OperatorStats]:
    """Every operator of a streaming executor's stats (``get_stats()``: a ``DatasetStats`` chain, walked upstream
    first, each entry once; an entry without block stats is no operator)."""
    out: list[OperatorStats] = []
    seen: set[int] = set()

    def walk(stats: Any) -> None:
        if stats is None or id(stats) in seen:
            return
        seen.add(id(stats))
        for parent in stats.parents:
            walk(parent)
        if not stats.metadata:
            return
        extra = getattr(stats, "extra_metrics", None) or {}
        rows_in = extra.get("num_row_inputs_received")
        out.append(OperatorStats(
            name=stats.base_name or next(iter(stats.metadata)),
            rows_in=int(rows_in) if rows_in is not None else None,
            held_s=float(extra.get("task_submission_backpressure_time") or 0.0),
            tasks=int(extra.get("num_tasks_finished") or 0),
            output_held_s=float(extra.get("task_output_backpressure_time_s") or 0.0),
            blocks=[_output_block(b) for blocks in stats.metadata.values() for b in blocks]))

    walk(executor.get_stats())
    return out


def node_pids() -> list[int]:
    """PIDs of the processes Ray's node started in this driver (GCS, raylet, dashboard, monitors); raises if this
    Ray keeps them elsewhere or started none here."""
    from ray._private import worker

    node = worker._global_node
    return [info.process.pid for infos in node.all_processes.values() for info in infos
            if getattr(info, "process", None) is not None]


#: what Ray's core worker logs, at ERROR level on the driver's stderr, when it creates an actor with
#: ``max_restarts`` != 0 whose constructor takes an object in the object store (ray-project/ray#53727)
RESTART_WARNING = "has constructor arguments in the object store and max_restarts > 0"


def spend_restart_warning() -> list[str]:
    """Let Ray print :data:`RESTART_WARNING` once, away from the console; returns any other line written meanwhile
    (the caller writes them back).

    Ray Data creates every actor of a pool with its map function and data context as object refs, and a pool that
    restarts its actors (a lost node's model actors must: docs/cluster.md) makes the driver's core worker log that
    ERROR line for the first pool of the process (``RAY_LOG_ONCE_PER_PROCESS``: it is never printed twice). Its
    risk does not apply to those pools: the driver holds the refs for the whole execution, in its own node's object
    store. So the driver creates one throwaway actor of the same shape at start, with its stderr pointed to a
    temporary file for that one synchronous call, and kills it: later pools print nothing. This relies on Ray's
    C++ logging printing the line once per process, which tests/test_score_pool.py holds (a restartable pool's run
    prints no such line)."""
    import os
    import sys
    import tempfile

    import ray

    @ray.remote(num_cpus=0, max_restarts=1)
    class _Restartable:
        def __init__(self, arg: Any) -> None:
            self.arg = arg

    ref = ray.put(b"0" * 1024)
    sys.stderr.flush()
    with tempfile.TemporaryFile() as caught:
        saved = os.dup(2)
        try:
            os.dup2(caught.fileno(), 2)
            actor = _Restartable.remote(ref)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        lines = caught.read().decode("utf-8", "replace").splitlines()
    ray.kill(actor)
    return [line for line in lines if RESTART_WARNING not in line]


#: the logger of Ray's token-authentication module (its ``logging.getLogger(__name__)``) and the start of the notice it
#: logs, as a warning, on every new local cluster: token authentication enabled, as Ray chose
TOKEN_NOTICE_LOGGER = "ray._private.authentication.authentication_token_setup"
TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"


def drop_token_notice() -> None:
    """Leave :data:`TOKEN_NOTICE` out of the console (it says the same on every run); its logger's other records
    pass."""
    logging.getLogger(TOKEN_NOTICE_LOGGER).addFilter(lambda record: not str(record.msg).startswith(TOKEN_NOTICE))
