"""A cap on the blocks queued between Ray Data stages, so that the driver's memory does not grow with the run.

Ray Data's own backpressure counts bytes in the object store. A run's request rows are small (a block of 64
requests is some 25 KiB), so nothing stopped the read and the streaming repartition from running far ahead of
decode, nor a pass-through decode from running ahead of the models. Every queued block is an object the driver
owns: its reference, lineage, metadata and schema cost the driver tens of KiB. A million-request run had about
13,000 blocks queued after 7 minutes, and the driver grew by 1.5 MiB/s.

:class:`QueuedBlocksCap` stops a stage (read, repartition, decode, judge, scoring, commit) from starting tasks
while the blocks waiting between it and its consumers (its output queue and their input queues, looking through a
union) number ``ray.max_queued_blocks`` or more. Consumers keep draining, so the run goes on; a stage is never
held back by less than that many batches waiting for the stage after it. Stages holding a GPU or a custom
resource (the models) are left alone: a model that answers faster than the CPU stages judge should finish and
free its GPU, not idle (capping them too made 100k simulated requests on 2 cores take 312 s instead of 270 s,
the GPUs 69 % busy instead of 81 %); their answers are small and their pace is the GPUs'. Ray Data's
byte-based policies still bound large blocks (decoded audio).

A held-back stage stays running until the end of the run, and Ray Data divides the CPU it reserves per stage
among the running stages: on 2 CPUs with four models, each got about 0.05. The light stages (request reads,
commits) ask that little, else they wait on the shared remainder: at 1M requests a commit asking 0.25 CPU never
started while the reads were held back.

The policy plugs into Ray Data's ``backpressure_policies.enabled`` setting (Ray 2.60's interface, internal to
Ray: ray is pinned, every private name it uses comes from :mod:`evalcore.core.ray_internals`, and
``tests/test_backpressure.py`` checks the bound on a live pipeline).
"""

from __future__ import annotations

from typing import Any

from evalcore.core.ray_internals import (ENABLED_BACKPRESSURE_POLICIES, ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY,
                                    BackpressurePolicy, UnionOperator, policy_context, policy_topology, queued_input,
                                    queued_output, remote_args)

CAP_KEY = "evalcore.max_queued_blocks"


class QueuedBlocksCap(BackpressurePolicy):
    """Backpressure a stage without accelerators while ``evalcore.max_queued_blocks`` blocks or more wait for its
    consumers."""

    @property
    def name(self) -> str:
        return "QueuedBlocksCap"

    def can_add_input(self, op: Any) -> bool:
        cap = policy_context(self).get_config(CAP_KEY, None)
        if cap is None or holds_accelerator(op):
            return True
        return queued_after(policy_topology(self), op) < int(cap)


def holds_accelerator(op: Any) -> bool:
    """Whether ``op``'s tasks or actors ask for a GPU or a custom resource (a model's, e.g. a simulated GPU)."""
    args = remote_args(op)
    return bool(args.get("num_gpus") or args.get("resources"))


def queued_after(topology: dict, op: Any) -> int:
    """Blocks in ``op``'s output queue and its consumers' input queues (a union's: its consumers' too)."""
    n = queued_output(topology, op)
    for d in op.output_dependencies:
        n += queued_input(topology, d)
        if isinstance(d, UnionOperator):
            n += queued_after(topology, d)
    return n


def install(context: Any, max_queued_blocks: int | None) -> None:
    """Enable :class:`QueuedBlocksCap` with ``max_queued_blocks`` on a Ray Data ``DataContext`` (None: no cap)."""
    policies = list(context.get_config(ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, None) or ENABLED_BACKPRESSURE_POLICIES)
    if QueuedBlocksCap not in policies:
        policies.append(QueuedBlocksCap)
    context.set_config(ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, policies)
    context.set_config(CAP_KEY, max_queued_blocks)
