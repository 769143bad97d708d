"""The simulated GPU model of the scale benchmark, its params, and models grouped by custom resources."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalcore.runconfig.config import ConfigError, ModelConfig, parse_config
from evalcore.models.base import AudioPrompt
from evalcore.models.simulated import SimulatedGPU
from evalcore.pipeline.resources import model_groups, uses_audio


def _cfg(params: dict, resources: dict | None = None) -> dict:
    return {"name": "s", "datasets": [{"name": "d", "kind": "synthetic", "params": {"n_clips": 2}}],
            "models": [{"name": "g", "kind": "simulated_gpu", "params": params, "resources": resources or {}}],
            "protocols": [{"name": "freeform"}]}


def test_it_sleeps_per_batch_answers_the_template_and_logs_its_batches(tmp_path):
    m = SimulatedGPU(seconds_per_batch=0.05, answer="{seconds} s: {prompt}", busy_log=str(tmp_path / "busy"))
    batch = [AudioPrompt(np.zeros(16_000 * 2, np.float32), 16_000, "what?"), AudioPrompt(None, 16_000, "and?")]
    assert m.generate(batch) == ["2.0 s: what?", "0.0 s: and?"]
    (log,) = (tmp_path / "busy").iterdir()
    start, end, n = log.read_text().split()
    assert float(end) - float(start) >= 0.05 and n == "2"


def test_params_are_checked_with_one_line_per_field():
    parse_config(_cfg({"seconds_per_batch": 0.2, "answer": "ok {prompt}"}, {"custom": {"sim_gpu": 1}}))
    with pytest.raises(ConfigError) as e:
        parse_config(_cfg({"seconds_per_batch": -1, "answer": "{reference}"}))
    msg = str(e.value)
    assert "seconds_per_batch: must be >= 0, got -1" in msg
    assert "answer" in msg and "unknown placeholder(s) ['reference']" in msg
    with pytest.raises(ConfigError, match="custom"):
        parse_config(_cfg({}, {"custom": {"sim_gpu": 0}}))


def test_the_text_variant_reads_no_audio():
    assert uses_audio(ModelConfig(name="a", kind="simulated_gpu"))
    assert not uses_audio(ModelConfig(name="a", kind="simulated_gpu_text"))


def test_models_are_grouped_so_their_custom_resources_fit():
    models = [ModelConfig(name=f"m{i}", kind="simulated_gpu",
                          resources={"num_cpus": 0.1, "custom": {"sim_gpu": 1}}) for i in range(4)]
    groups = model_groups(models, cpus=2, gpus=0, custom={"sim_gpu": 2})
    assert [[m.name for m in g] for g in groups] == [["m0", "m1"], ["m2", "m3"]]
    assert len(model_groups(models, cpus=2, gpus=0, custom={"sim_gpu": 4})) == 1


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, local_ray):
    """One run of two ``simulated_gpu_text`` models on 250 free-form questions (correct + random), batches of 64;
    ``slow``'s decode tasks take 1 s more per batch (``decode_seconds_per_batch``), ``fast``'s none; a decode task
    asks a whole CPU, so two run at once and the slow model's 8 batches take about 4 s, longer than its actor's
    start (with many small decode tasks at once, all ended before the actor took its first batch):
    (its busy logs' directory, its root, its result)."""
    from evalcore.pipeline.run import run

    tmp = tmp_path_factory.mktemp("two_models")
    items = tmp / "items.jsonl"
    items.write_text("".join(json.dumps({"item_id": f"q{i:03d}", "protocol": "freeform", "task": "caption",
                                         "audio_uri": f"clip{i % 7}.wav", "question": f"Describe it ({i}).",
                                         "reference": f"A piece, number {i}."}) + "\n" for i in range(250)))
    busy = tmp / "busy"
    models = [{"name": m, "kind": "simulated_gpu_text",
               "params": {"seconds_per_batch": 0.0, "busy_log": str(busy / m),
                          **({"decode_seconds_per_batch": 1.0} if m == "slow" else {})},
               "resources": {"num_cpus": 0.01, "concurrency": 1, "batch_size": 64}} for m in ("slow", "fast")]
    res = run(parse_config({"name": "full", "datasets": [{"name": "qa", "kind": "items_file",
                                                          "params": {"path": str(items)}}],
                            "models": models, "protocols": [{"name": "freeform", "conditions": ["correct", "random"]}],
                            "stats": {"bootstrap_resamples": 100}, "storage": {"root": str(tmp / "run")},
                            "ray": {"progress_bars": False, "decode_num_cpus": 1.0}}))
    return busy, tmp / "run", res


@pytest.mark.ray
def test_each_model_batch_is_full_but_a_models_last(two_models):
    """Ray Data splits a read task's output into parts that do not line up with the batch size; the model
    stage still gets batches of exactly ``batch_size`` rows, one short batch per model at most."""
    busy, _, res = two_models
    assert res.counts["requests_in"] == 2 * 2 * 250 == res.counts["requests_scored"]
    for m in ("slow", "fast"):
        sizes = [int(line.split()[2]) for f in (busy / m).iterdir() for line in f.read_text().splitlines()]
        assert sum(sizes) == 2 * 250
        assert sorted(sizes)[1:] == [64] * (len(sizes) - 1) and 1 <= min(sizes) <= 64, sorted(sizes)


@pytest.mark.ray
def test_a_model_whose_decode_is_slow_is_reported_starved_by_decode(two_models):
    """The model whose decode tasks sleep waits for input most of its stage: run.json's profile counts its starved
    seconds and names decode as what held it, and the report's run section and the console's closing lines say so."""
    from evalcore.reports.console import profile_lines

    _, root, res = two_models
    profile = json.loads((root / "run.json").read_text())["profile"]
    slow = profile["models"]["slow"]
    assert slow["starved_fraction"] > 0.2 and slow["starved_s"] > 0, slow  # 8 batches, each 1 s to decode
    assert slow["starved_s"] + slow["busy_s"] <= slow["wall_s"] * slow["actors"] + 0.5, slow
    assert next(iter(slow["starved_by"])) == "decode", slow  # the most first
    stage = next(s for s in profile["stages"] if s["stage"] == "model:slow")
    assert stage["starved_s"] == slow["starved_s"]
    note = f"Model slow waited for input {slow['starved_s']:,.1f} s"
    (line,) = [x for x in res.report.split("\n## Run\n", 1)[1].splitlines() if x.startswith("Model slow ")]
    assert line.startswith(note) and "held by decode (" in line, line
    assert any(x.startswith(f"profile: {note}") and "held by decode (" in x for x in profile_lines(profile))


def test_aligned_blocks_hold_whole_batches_and_enough_blocks_for_the_cpus():
    from evalcore.pipeline.resources import aligned_rows

    assert aligned_rows(8) == aligned_rows(64) == 1024 and aligned_rows(300) == 900  # unknown size: the most
    assert aligned_rows(8, 10_080, 2) == 1024 and aligned_rows(8, 4_000, 2) == 496  # a long run: few, large tasks
    assert aligned_rows(8, 360, 2) == 40  # 9 blocks, 4 or more per CPU
    assert aligned_rows(8, 360, 32) == 8 and aligned_rows(64, 10, 2) == 64  # never less than one batch
    for bs, n, cpus in ((8, 3_600, 2), (64, 25_000, 4), (5, 1_234, 3), (100, 999, 1)):
        assert aligned_rows(bs, n, cpus) % bs == 0
    # ray.audio_block_requests caps the blocks of a model that reads audio, still in whole batches
    assert aligned_rows(8, 10_080, 2, most_requests=64) == 64 and aligned_rows(8, 10_080, 2, None) == 1024
    assert aligned_rows(64, 10_080, 2, most_requests=8) == 64 and aligned_rows(8, 100, 2, most_requests=64) == 8
