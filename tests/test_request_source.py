"""Requests as a Ray Data source: read tasks over slices of the items give the run's requests to run."""

from __future__ import annotations

import pytest

from evalcore.runconfig.config import parse_config
from evalcore.datasets.validate import validate_items
from evalcore.pipeline.sources import plan_requests, request_source
from evalcore.protocols.requests import expand_requests, expansion


@pytest.mark.ray
def test_read_tasks_give_the_requests_to_run_even_with_large_items(local_ray):
    """Items of 3 KB each (a slice well over Ray Data's 1 MiB read-task size check): every request to run,
    once, none of those skipped (committed earlier)."""
    rows = [{"item_id": f"q{i}", "protocol": "freeform", "audio_uri": f"/audio/clip{i % 7}.wav",
             "question": f"Describe piece {i}. " + "x" * 3000, "reference": f"answer {i}"} for i in range(2000)]
    items, bad = validate_items("d", rows)
    assert not bad
    for it in items:
        it["dataset"] = "d"
    cfg = parse_config({"name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "x.jsonl"}}],
                        "models": [{"name": "m1", "kind": "null"}, {"name": "m2", "kind": "null"}],
                        "protocols": [{"name": "freeform", "conditions": ["correct", "random"]}]})
    whole = expand_requests(cfg, items)
    skip = {r["request_id"] for r in whole[:100]}
    exp = expansion(cfg, items)
    plan = plan_requests(cfg, items, exp, done=skip)
    assert plan.total == len(whole) == 8000 and plan.committed == 100
    for m in cfg.models:
        ds = request_source(cfg, items, exp, m, plan.ready[m.name], skip)
        got = [r["request_id"] for r in ds.select_columns(["request_id"]).take_all()]
        want = {r["request_id"] for r in whole if r["model"] == m.name} - skip
        assert len(got) == len(want) == plan.ready[m.name] and set(got) == want
