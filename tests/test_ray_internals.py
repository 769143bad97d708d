"""The private Ray API evalcore uses, all of it named in evalcore/core/ray_internals.py, checked against the installed
Ray without starting it: an upgrade that moves a module, a class, a method or an attribute fails here, by name,
before any run does. (The live behaviour is checked by tests/test_backpressure.py and the full model batches of
the pipeline tests.)"""

from __future__ import annotations

import dataclasses
import inspect
import types

import pytest

from evalcore.core import ray_internals as ri


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


def test_importing_it_imports_no_ray() -> None:
    """The console names Ray's logger from here before any command loads Ray (ray.data takes seconds)."""
    import subprocess
    import sys

    code = "import sys, evalcore.core.ray_internals; print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        ri.NoSuchName  # noqa: B018


def test_a_dataset_executed_as_block_references() -> None:
    import ray.data
    from ray.data._internal.execution.interfaces.ref_bundle import BlockEntry, BlockSlice, RefBundle
    from ray.data.block import BlockMetadata

    source = inspect.getsource(ray.data.dataset)  # the method is wrapped (no signature of its own)
    assert "def _execute_to_iterator(\n        self, capture_executor: bool = True\n    )" in source
    assert "return bundle_iter, self._cache.get_stats(), executor" in source  # what execute unpacks
    ds = types.SimpleNamespace(_execute_to_iterator=lambda capture_executor: (iter(["b"]), "stats", "executor"))
    it, executor = ri.execute(ds)
    assert list(it) == ["b"] and executor == "executor"

    meta = BlockMetadata(num_rows=5, size_bytes=10, exec_stats=None, input_files=None)
    whole = RefBundle((BlockEntry(ref="r1", metadata=meta),), schema=None, owns_blocks=False)
    assert ri.bundle_blocks(whole) == (["r1"], [None], 5)
    sliced = RefBundle((BlockEntry(ref="r1", metadata=meta), BlockEntry(ref="r2", metadata=meta)), schema=None,
                       owns_blocks=False, slices=[BlockSlice(1, 3), None])
    assert ri.bundle_blocks(sliced) == (["r1", "r2"], [(1, 3), None], 7)


def test_an_executor_s_stats_per_operator() -> None:
    from ray.data._internal.execution.interfaces.op_runtime_metrics import OpRuntimeMetrics
    from ray.data._internal.execution.streaming_executor import StreamingExecutor
    from ray.data._internal.stats import DatasetStats
    from ray.data.block import BlockExecStats, BlockStats

    assert callable(StreamingExecutor.get_stats)
    assert "stats.extra_metrics = op.metrics.as_dict(skip_internal_metrics=True)" in inspect.getsource(
        StreamingExecutor._generate_stats)
    metrics = {m.name: m for m in OpRuntimeMetrics.get_metrics()}
    for name in ri.OPERATOR_METRICS:  # each recorded in the final stats (internal metrics are left out there)
        assert name in metrics and not metrics[name].internal_only and not metrics[name].map_only, name

    timed = BlockExecStats(node_id="n1", start_time_s=10.0, end_time_s=12.5, wall_time_s=2.5)
    read = DatasetStats(metadata={"ReadRange": [BlockStats(num_rows=4, size_bytes=8, exec_stats=timed)]}, parent=None)
    untimed = BlockStats(num_rows=3, size_bytes=8, exec_stats=None)
    half = BlockStats(num_rows=None, size_bytes=8, exec_stats=BlockExecStats(node_id="n2", wall_time_s=1.0))
    mapped = DatasetStats(metadata={"Map(f)": [untimed, half]}, parent=[read, read], base_name="Map(f)->Map(g)")
    mapped.extra_metrics = {"num_row_inputs_received": 4, "task_submission_backpressure_time": 0.5,
                            "num_tasks_finished": 2, "task_output_backpressure_time_s": 0.25, "cpu_usage": 1}
    empty = DatasetStats(metadata={}, parent=mapped)  # an entry with no blocks: no operator
    got = ri.operator_stats(types.SimpleNamespace(get_stats=lambda: empty))
    assert got == [
        ri.OperatorStats("ReadRange", None, 0.0, 0, 0.0, [ri.OutputBlock(4, 2.5, ("n1", 10.0, 12.5))]),
        ri.OperatorStats("Map(f)->Map(g)", 4, 0.5, 2, 0.25,
                         [ri.OutputBlock(3, 0.0, None), ri.OutputBlock(0, 1.0, None)]),
    ]


def test_ray_s_token_notice() -> None:
    import importlib
    import logging

    module = importlib.import_module(ri.TOKEN_NOTICE_LOGGER)
    source = inspect.getsource(module)
    assert "logger = logging.getLogger(__name__)" in source and f'"{ri.TOKEN_NOTICE}. Set "' in source
    ri.drop_token_notice()
    logger = logging.getLogger(ri.TOKEN_NOTICE_LOGGER)
    make = lambda msg: logger.makeRecord(logger.name, logging.WARNING, __file__, 0, msg, (), None)  # noqa: E731
    assert not logger.filter(make(f"{ri.TOKEN_NOTICE}. Set RAY_AUTH_MODE=disabled …"))
    assert logger.filter(make("Generated new authentication token"))
