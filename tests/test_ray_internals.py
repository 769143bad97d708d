"""The private Ray API evalcore uses, all of it named in evalcore/ray_internals.py, checked against the installed
Ray without starting it: an upgrade that moves a module, a class, a method or an attribute fails here, by name,
before any run does. (The live behaviour is checked by tests/test_backpressure.py and the full model batches of
the pipeline tests.)"""

from __future__ import annotations

import dataclasses
import inspect
import types

import pytest

from evalcore import ray_internals as ri


def test_the_backpressure_policy_interface():
    assert ri.BackpressurePolicy in ri.ENABLED_BACKPRESSURE_POLICIES[0].__mro__
    assert isinstance(ri.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, str)
    assert callable(ri.BackpressurePolicy.can_add_input)
    assert list(inspect.signature(ri.BackpressurePolicy.__init__).parameters)[1:3] == ["data_context", "topology"]

    class Probe(ri.BackpressurePolicy):
        def can_add_input(self, op):
            return True

    ctx, topology = object(), {}
    policy = Probe(ctx, topology, None)
    assert ri.policy_context(policy) is ctx and ri.policy_topology(policy) is topology


def test_the_topology_and_the_operators():
    from ray.data._internal.execution.interfaces import PhysicalOperator
    from ray.data._internal.execution.operators.map_operator import MapOperator
    from ray.data._internal.execution.streaming_executor_state import OpState

    assert callable(OpState.total_enqueued_output_blocks) and callable(OpState.total_enqueued_input_blocks)
    assert "output_dependencies" in dir(PhysicalOperator)
    assert "self._ray_remote_args" in inspect.getsource(MapOperator)  # what remote_args reads
    state = types.SimpleNamespace(total_enqueued_output_blocks=lambda: 3, total_enqueued_input_blocks=lambda: 2)
    assert ri.queued_output({"op": state}, "op") == 3 and ri.queued_input({"op": state}, "op") == 2
    assert ri.remote_args(types.SimpleNamespace(_ray_remote_args={"num_gpus": 1})) == {"num_gpus": 1}
    assert issubclass(ri.UnionOperator, PhysicalOperator)


def test_the_streaming_repartition_gets_its_cpus():
    import ray.data
    from ray.data._internal.logical.interfaces.logical_plan import LogicalPlan
    from ray.data._internal.logical.operators import InputData

    fields = {f.name for f in dataclasses.fields(ri.StreamingRepartition)}
    assert "ray_remote_args" in fields and ri.StreamingRepartition.__dataclass_params__.frozen
    assert "self._logical_plan = " in inspect.getsource(ray.data.Dataset.__init__)
    assert isinstance(inspect.getattr_static(LogicalPlan, "dag"), property)
    op = ri.StreamingRepartition(input_dependencies=[InputData(input_data=[])], target_num_rows_per_block=4)
    ds = types.SimpleNamespace(_logical_plan=types.SimpleNamespace(dag=op))
    assert ri.set_repartition_cpus(ds, 0.1) is ds and op.ray_remote_args == {"num_cpus": 0.1}
    with pytest.raises(TypeError, match="not a StreamingRepartition"):
        ri.set_repartition_cpus(types.SimpleNamespace(_logical_plan=types.SimpleNamespace(dag=object())), 0.1)


def test_the_node_s_processes():
    from ray._private import node, worker

    assert hasattr(worker, "_global_node")
    assert "self.all_processes" in inspect.getsource(node.Node.__init__)


def test_what_the_starvation_watch_reads():
    from ray.data._internal.execution.interfaces import PhysicalOperator
    from ray.data._internal.execution.operators.actor_pool_map_operator import ActorPoolMapOperator, _ActorPool
    from ray.data._internal.execution.streaming_executor import StreamingExecutor

    assert callable(ActorPoolMapOperator.get_autoscaling_actor_pools)
    assert callable(_ActorPool.num_running_actors) and callable(_ActorPool.num_active_actors)
    assert callable(PhysicalOperator.num_active_tasks) and callable(PhysicalOperator.has_completed)
    assert "self._in_task_submission_backpressure = " in inspect.getsource(PhysicalOperator.__init__)
    assert "self._task_submission_backpressure_policy" in inspect.getsource(PhysicalOperator.__init__)
    assert "self._backpressure_policies" in inspect.getsource(StreamingExecutor.__init__)
    assert callable(ri.BackpressurePolicy.max_task_output_bytes_to_read)
    pool = types.SimpleNamespace(num_running_actors=lambda: 2, num_active_actors=lambda: 1)
    assert ri.actor_counts(types.SimpleNamespace(get_autoscaling_actor_pools=lambda: [pool])) == (2, 1)
    assert ri.actor_counts(types.SimpleNamespace(get_autoscaling_actor_pools=lambda: [])) is None
    held = types.SimpleNamespace(_in_task_submission_backpressure=True,
                                 _task_submission_backpressure_policy="ResourceBudget")
    assert ri.held_by(held) == "ResourceBudget"
    assert ri.held_by(types.SimpleNamespace(_in_task_submission_backpressure=False)) is None
    assert ri.executor_policies(types.SimpleNamespace(_backpressure_policies=[1])) == [1]
