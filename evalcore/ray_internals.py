"""Every use of Ray's private API, in one module: what evalcore needs that Ray 2.60 offers no public way to do.

ray is pinned (pyproject: ``ray[data,default]==2.60.0``); ``tests/test_ray_internals.py`` imports this module and
checks each name and attribute below against the installed Ray, so an upgrade that moves one fails there, by
name, before any run does. Nothing else in evalcore imports ``ray._private`` or ``ray.data._internal`` or reads a
private attribute of a Ray object.

* A backpressure policy (:mod:`evalcore.pipeline.backpressure`): Ray Data's ``BackpressurePolicy`` base class and
  its setting, the union operator, an operator's remote args, and the topology's queued blocks.
* The resources of a streaming repartition (:func:`set_repartition_cpus`): Ray 2.60's ``repartition`` takes no
  resource arguments; the operator at the head of the dataset's logical plan gets them.
* The processes of the local node this driver started (:func:`node_pids`, :mod:`evalcore.cluster`).
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
           "queued_output", "queued_input", "set_repartition_cpus", "node_pids"]


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
