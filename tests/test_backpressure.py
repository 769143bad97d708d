"""The queued-blocks cap (evalcore.pipeline.backpressure) on a live Ray Data pipeline: a fast stage feeding a slow
one stays at most about the cap ahead of it; without the cap it runs through its whole input."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from evalcore.pipeline import backpressure

BLOCKS = 80
CAP = 4


def _most_ahead(tmp_path, name: str, cap: int | None) -> int:
    """How many blocks the fast stage had made, at most, beyond those the slow stage had taken."""
    import ray
    from ray.data import ActorPoolStrategy, DataContext

    def stamp(batch: dict, log: str) -> dict:  # defined here: workers get it by value, not by module name
        with open(log, "a") as f:
            f.write(f"{time.time()}\n")
        return batch

    class Slow:
        def __init__(self, log: str) -> None:
            self.log = log

        def __call__(self, batch: dict) -> dict:
            time.sleep(0.08)
            return stamp(batch, self.log)

    fast, slow = tmp_path / f"{name}-fast", tmp_path / f"{name}-slow"
    ctx = DataContext.get_current()
    saved = (ctx.get_config(backpressure.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, None)
             or backpressure.ENABLED_BACKPRESSURE_POLICIES, ctx.get_config(backpressure.CAP_KEY, None))
    try:
        backpressure.install(ctx, cap)
        ds = ray.data.from_arrow([pa.table({"id": [i]}) for i in range(BLOCKS)])  # blocks ready: no read stage
        ds = ds.map_batches(stamp, fn_kwargs={"log": str(fast)}, batch_size=None, num_cpus=0.2)
        ds = ds.map_batches(Slow, fn_constructor_kwargs={"log": str(slow)}, batch_size=1, num_cpus=0.1,
                            compute=ActorPoolStrategy(size=1))
        assert sum(len(b["id"]) for b in ds.iter_batches(batch_size=None)) == BLOCKS
    finally:
        for key, value in zip((backpressure.ENABLED_BACKPRESSURE_POLICIES_CONFIG_KEY, backpressure.CAP_KEY), saved):
            ctx.set_config(key, value)
    made = sorted(float(x) for x in fast.read_text().split())
    taken = sorted(float(x) for x in slow.read_text().split())
    assert len(made) == len(taken) == BLOCKS
    return max(sum(1 for t in made if t <= done) - i for i, done in enumerate(taken))


@pytest.mark.usefixtures("local_ray")
def test_a_fast_stage_waits_while_blocks_queue_for_a_slow_one(tmp_path):
    capped = _most_ahead(tmp_path, "capped", CAP)
    free = _most_ahead(tmp_path, "free", None)
    assert capped <= CAP + 12, capped  # the cap, plus the tasks in flight when it closed and the actor's inputs
    assert free > 2 * capped, (free, capped)  # the measure sees the difference
