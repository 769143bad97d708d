"""Every use of Ray's private API, in one module: what evalcore needs that Ray 2.60 offers no public way to do.

ray is pinned (pyproject: ``ray[data,default]==2.60.0``); ``tests/test_ray_internals.py`` imports this module and
checks each name and attribute below against the installed Ray, so an upgrade that moves one fails there, by
name, before any run does. Nothing else in evalcore imports ``ray._private`` or ``ray.data._internal`` or reads a
private attribute of a Ray object.

* A backpressure policy (:mod:`evalcore.pipeline.backpressure`): Ray Data's ``BackpressurePolicy`` base class and
  its setting, the union operator, an operator's remote args, and the topology's queued blocks.
* The resources of a streaming repartition (:func:`set_repartition_cpus`): Ray 2.60's ``repartition`` takes no
  resource arguments; the operator at the head of the dataset's logical plan gets them.
* What a starvation watch reads of the running topology (:mod:`evalcore.pipeline.starvation`): an actor pool's
  running and working actors, whether an operator is held back by a backpressure policy and by which, and the
  policies an executor ran with (:func:`executor_policies`), from which the run reads the watch's tallies.
* The processes of the local node this driver started (:func:`node_pids`, :mod:`evalcore.cluster`).
* One line of Ray's C++ log that every restartable Ray Data actor pool prints (:func:`spend_restart_warning`).
"""

from __future__ import annotations

from typing import Any

from ray.data._internal.execution.backpressure_policy import (
    ENABLED_BACKPRESSURE_POLICIES,
    ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY,
    BackpressurePolicy,
)
from ray.data._internal.execution.operators.union_operator import UnionOperator
from ray.data._internal.logical.operators import StreamingRepartition

__all__ = ["ENABLED_BACKPRESSURE_POLICIES", "ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY", "BackpressurePolicy",
           "UnionOperator", "StreamingRepartition", "remote_args", "policy_context", "policy_topology",
           "queued_output", "queued_input", "actor_counts", "held_by", "executor_policies", "set_repartition_cpus",
           "node_pids", "spend_restart_warning",
           "RESTART_WARNING"]


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
    op = ds._logical_plan.dag
    if not isinstance(op, StreamingRepartition):
        raise TypeError(f"the dataset's last operator is {type(op).__name__}, not a StreamingRepartition "
                        "(a Ray upgrade builds repartitions otherwise; see evalcore/ray_internals.py)")
    object.__setattr__(op, "ray_remote_args", {"num_cpus": num_cpus})
    return ds


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
