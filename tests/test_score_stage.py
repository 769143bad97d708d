"""The streamed scoring stage: tasks for short runs, a pool of actors for long ones, the same scores."""

from __future__ import annotations

import json

import pytest

from evalcore.runconfig.config import parse_config
from evalcore.pipeline.stages import JUDGED, _table


@pytest.mark.ray
def test_the_actor_pool_and_the_tasks_score_alike(local_ray):
    import ray.data

    from evalcore.pipeline.graph import GraphSettings, scored

    cfg = parse_config({"name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "x.jsonl"}}],
                        "models": [{"name": "m", "kind": "null"}], "protocols": [{"name": "freeform"}]})
    rows = [{"request_id": f"r{i}", "dataset": "d", "item_id": f"q{i}", "protocol": "freeform", "model": "m",
             "condition": "correct", "variant": "v", "option_order": 0, "chunk_index": 0, "n_chunks": 1,
             "reference": f"a calm piano piece number {i}", "text": f"a slow piano piece {i % 3}"} for i in range(40)]
    got = {}
    for pool in (False, True):
        ds = scored(GraphSettings.of(cfg, {}), ray.data.from_arrow(_table(rows, JUDGED)), pool)
        got[pool] = {r["request_id"]: json.loads(r["scores"]) for r in ds.take_all()}
    assert len(got[True]) == 40 and got[True] == got[False]
    assert set(got[True]["r0"]) == {"profile", "bleu", "bleu4", "meteor", "rouge"}
