"""The listening curve: how much of the clip a model needs, read off the summary of a run with segment conditions.

One run on Ray (module scope) asks the demo's two models multiple-choice questions of two benchmarks under no
audio, the first 10/25/50 % and the last 10 % of each clip, and the whole clip: the synthetic demo benchmark (its
music is the same from start to end) and a benchmark synthesized here whose answer lies only in each clip's last
second (seven seconds of silence, then one second of one instrument). The listener's curve rises with the audio
kept; the text prior's stays flat; on the last-second benchmark the first-part curve stays at chance until the
whole clip, while the last 10 % already gives the whole score.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from evalcore.datasets.synth_audio import ClipSpec, synthesize_clip
from evalcore.models.dsp_listener import INSTRUMENTS
from evalcore.reports.listening_curve import Curve, Point, curves

SR = 16_000
CONDITIONS = ["correct", "first_10", "first_25", "first_50", "last_10", "text_only"]


def _tail_benchmark(root) -> str:
    """20 clips of 8 s: silence, then one instrument in the last second; "which instrument can be heard?"."""
    rng = np.random.default_rng(3)
    rows = []
    (root / "audio").mkdir(parents=True)
    for i in range(20):
        inst = INSTRUMENTS[i % len(INSTRUMENTS)]
        tail = synthesize_clip(ClipSpec(f"t{i}", 120.0, "C", "major", (inst,), 1.0, 100 + i), SR)
        sf.write(root / "audio" / f"t{i}.wav", np.concatenate([np.zeros(7 * SR, np.float32), tail]), SR)
        options = [inst, *rng.choice([o for o in INSTRUMENTS if o != inst], 3, replace=False).tolist()]
        rows.append({"item_id": f"tail{i}", "protocol": "mcq", "audio_uri": f"audio/t{i}.wav", "task": "instrument",
                     "question": "Which of these instruments can be heard?", "options": options, "correct_option": 0})
    path = root / "items.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def curve_run(tmp_path_factory, local_ray):
    from evalcore.pipeline.run import run
    from evalcore.runconfig.config import parse_config

    root = tmp_path_factory.mktemp("curve")
    cfg = parse_config({
        "name": "curve",
        "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 24, "seconds": 8.0, "seed": 0}},
                     {"name": "tail", "kind": "items_file", "params": {"path": _tail_benchmark(root / "tail")}}],
        "models": [{"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 16}},
                   {"name": "text-prior", "kind": "text_prior", "resources": {"num_cpus": 0.25, "batch_size": 16}}],
        "protocols": [{"name": "mcq", "conditions": CONDITIONS, "judge": {"kind": "mcq_string"}, "option_orders": 2}],
        "storage": {"root": str(root / "run")},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
    })
    result = run(cfg)
    summary = pd.read_parquet(f"{result.root}/tables/summary.parquet")
    return result, {(c.dataset, c.model, c.position): c for c in curves(summary)}


def test_the_listeners_curve_rises_and_the_text_priors_stays_flat(curve_run):
    _, found = curve_run
    listener = found[("synth", "listener", "first")]
    values = [p.value for p in listener.points]
    assert [p.condition for p in listener.points] == ["text_only", "first_10", "first_25", "first_50", "correct"]
    assert values[0] < values[1] < values[2] <= values[4] and values[3] <= values[4]
    assert listener.zero().below_whole() and listener.points[1].below_whole()  # 10 % loses something for sure
    prior = found[("synth", "text-prior", "first")]
    assert prior.flat() and not any(p.below_whole() for p in prior.points[:-1])
    assert all(p.ci_low <= prior.whole().value <= p.ci_high for p in prior.points)  # flat within its CIs
    assert "flat" in prior.line()


def test_an_answer_in_the_last_second_keeps_the_first_part_curve_at_chance(curve_run):
    _, found = curve_run
    first, last = found[("tail", "listener", "first")], found[("tail", "listener", "last")]
    assert first.whole().value >= 0.9
    for p in first.points[:-1]:  # no audio, 10, 25, 50 %: at chance (4 options) and below the whole clip
        assert p.ci_low <= 0.25 <= p.ci_high and p.below_whole(), p
    assert first.knee() is None and "still rising at the first 50%" in first.line()
    assert last.knee().condition == "last_10" and "the last 10% gives 100% of the score" in last.line()


def test_the_report_says_where_each_curve_stops_rising_and_draws_it(curve_run):
    result, found = curve_run
    report = open(f"{result.root}/report.md", encoding="utf-8").read()
    section = report.split("## How much of the clip does it need?")[1].split("\n## ")[0]
    for c in found.values():
        assert f"* {c.line()}" in section
    html = open(f"{result.root}/report.html", encoding="utf-8").read()
    after = html.split("How much of the clip does it need?")[1]
    assert "<img" in after.split("<h2")[0] or "<svg" in after.split("<h2")[0]
    assert "correct-first_25" not in " ".join(result.verdicts)  # the verdict reads the controls only


def _point(name, kept, value, low=None, high=None, diff=math.nan, d_low=math.nan, d_high=math.nan):
    return Point(name, kept, value, value - 0.05 if low is None else low, value + 0.05 if high is None else high,
                 40, diff, d_low, d_high, 40)


def test_a_curve_stops_rising_where_no_larger_segment_scores_below_the_whole_clip():
    pts = (_point("text_only", 0, 0.25, diff=0.7, d_low=0.6, d_high=0.8),
           _point("first_10", 0.1, 0.6, diff=0.35, d_low=0.25, d_high=0.45),
           _point("first_25", 0.25, 0.92, diff=0.03, d_low=-0.01, d_high=0.07),
           _point("first_50", 0.5, 0.95, diff=0.0, d_low=-0.02, d_high=0.02), _point("correct", 1, 0.95))
    c = Curve("mcq", "d", "m", "default", "first", "accuracy", pts)
    assert c.knee().condition == "first_25"
    assert c.line().startswith("m · mcq · d: the first 25% gives 97% of the score (96% of what the clip adds over "
                               "no audio); from there on no segment scores below the whole clip")
    rising = Curve("mcq", "d", "m", "default", "first", "accuracy",
                   pts[:3] + (_point("first_50", 0.5, 0.8, diff=0.15, d_low=0.1, d_high=0.2), pts[4]))
    assert rising.knee() is None and "still rising at the first 50%" in rising.line()
