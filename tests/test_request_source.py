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


def test_the_plan_counts_the_distinct_sounds_each_model_that_listens_plays():
    """Per model that reads audio, the distinct sounds its requests to run play (a clip's questions and its random
    partner's share one; noise and silence are one draw per clip; text_only none), which sizes its decoded blocks."""
    from evalcore.pipeline.resources import ALIGNED_BLOCK_REQUESTS, SOUNDS_PER_BLOCK, block_requests_for_sounds
    from evalcore.pipeline.sources import Sounds
    from evalcore.pipeline.stages import sound_key

    rows = [{"item_id": f"q{i}", "protocol": "freeform", "audio_uri": f"/audio/clip{i % 7}.wav",
             "question": f"Describe piece {i}.", "reference": f"answer {i}"} for i in range(70)]
    items, bad = validate_items("d", rows)
    assert not bad
    for it in items:
        it["dataset"] = "d"
    cfg = parse_config({"name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "x.jsonl"}}],
                        "models": [{"name": "hears", "kind": "null"},
                                   {"name": "deaf", "kind": "simulated_gpu_text", "params": {"seconds_per_batch": 0.0}}],
                        "protocols": [{"name": "freeform",
                                       "conditions": ["correct", "random", "silence", "noise", "text_only"]}]})
    whole = expand_requests(cfg, items)
    plan = plan_requests(cfg, items, expansion(cfg, items))
    assert plan.ready == {"hears": 350, "deaf": 350} and set(plan.sounds) == {"hears"}  # reads no audio
    assert plan.sounds["hears"] == 7 + 7 + 7 == len({sound_key(r) for r in whole if r["model"] == "hears"} - {None})
    assert block_requests_for_sounds(1_000, 1_000) == SOUNDS_PER_BLOCK  # a sound per request: blocks of 256
    assert block_requests_for_sounds(1_000, 800) == 320  # 1.25 requests a sound: 256 sounds a block
    assert block_requests_for_sounds(10_080, 560) == ALIGNED_BLOCK_REQUESTS  # MusicQA: 18 a clip
    assert block_requests_for_sounds(1_000, 0) == ALIGNED_BLOCK_REQUESTS  # nothing to carry
    # past the exact count, the share of distinct sounds so far stands for the rest
    est = Sounds(most=10)
    for i in range(100):
        est.add({"condition": "correct", "audio_uri": f"c{i // 4}", "excerpt_start": None, "excerpt_end": None})
    assert est.full_at == 37 and est.count() == round(10 * 100 / 37)
