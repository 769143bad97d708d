"""How much of the clip does a model need, and which items need it at all: the listening curve and the
audio-required subset, read off one run with segment conditions.

One run on Ray (module scope) asks the demo's two models multiple-choice questions of two benchmarks under no
audio, the first 10/25/50 % and the last 10 % of each clip, and the whole clip: the synthetic demo benchmark (its
music is the same from start to end) and a benchmark synthesized here whose answer lies only in each clip's last
second (seven seconds of silence, then one second of one instrument). The listener's curve rises with the audio
kept; the text prior's stays flat; on the last-second benchmark the first-part curve stays at chance until the
whole clip, while the last 10 % already gives the whole score. A third benchmark in MuChoMusic's released CSV layout
holds the audio-required subset: the items no answer without audio got right (the text prior, and ``text_only``),
computed by hand from per_item.parquet, written by ``evalcore subset`` and read back by MuChoMusic's own loader.
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


def _muchomusic_benchmark(root) -> dict:
    """MuChoMusic's released CSV layout (read through ``audio_pattern``): 12 questions on synthetic clips, which
    instrument plays; the dataset's params."""
    from evalcore.datasets.synthetic import make_specs

    root.mkdir(parents=True)
    rows = []
    for i, spec in enumerate(make_specs(12, 4.0, 9)):
        sf.write(root / f"{1000 + i}.wav", synthesize_clip(spec, SR), SR)
        absent = [x for x in INSTRUMENTS if x not in spec.instruments]
        rows.append({"question": "Which of these instruments can be heard?", "correct_answer": spec.instruments[0],
                     "distractor_1_answer": absent[0], "distractor_2_answer": absent[1], "distractor_3_answer": "piano",
                     "dataset": "sdd", "dataset_identifier": f"{1000 + i}.json", "genre": "Pop",
                     "music_knowledge": "[]", "music_reasoning": "[]"})
    pd.DataFrame(rows).to_csv(root / "muchomusic.csv", index=False)
    return {"path": str(root / "muchomusic.csv"), "audio_root": str(root), "audio_pattern": "{audio_id}.wav"}


@pytest.fixture(scope="module")
def curve_run(tmp_path_factory, local_ray):
    from evalcore.pipeline.run import run
    from evalcore.runconfig.config import parse_config

    root = tmp_path_factory.mktemp("curve")
    cfg = parse_config({
        "name": "curve",
        "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 24, "seconds": 8.0, "seed": 0}},
                     {"name": "tail", "kind": "items_file", "params": {"path": _tail_benchmark(root / "tail")}},
                     {"name": "mucho", "kind": "muchomusic", "params": _muchomusic_benchmark(root / "mucho")}],
        "models": [{"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 16}},
                   {"name": "text-prior", "kind": "text_prior", "resources": {"num_cpus": 0.25, "batch_size": 16}}],
        "protocols": [{"name": "mcq", "conditions": CONDITIONS, "judge": {"kind": "mcq_string"}, "option_orders": 2}],
        "storage": {"root": str(root / "run")},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
    })
    result = run(cfg)
    summary = pd.read_parquet(f"{result.root}/tables/summary.parquet")
    return result, {(c.dataset, c.model, c.position): c for c in curves(summary)}, cfg


def test_the_listeners_curve_rises_and_the_text_priors_stays_flat(curve_run):
    _, found, _ = curve_run
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
    _, found, _ = curve_run
    first, last = found[("tail", "listener", "first")], found[("tail", "listener", "last")]
    assert first.whole().value >= 0.9
    for p in first.points[:-1]:  # no audio, 10, 25, 50 %: at chance (4 options) and below the whole clip
        assert p.ci_low <= 0.25 <= p.ci_high and p.below_whole(), p
    assert first.knee() is None and "still rising at the first 50%" in first.line()
    assert last.knee().condition == "last_10" and "the last 10% gives 100% of the score" in last.line()


def test_the_report_says_where_each_curve_stops_rising_and_draws_it(curve_run):
    result, found, _ = curve_run
    report = open(f"{result.root}/report.md", encoding="utf-8").read()
    section = report.split("## How much of the clip does it need?")[1].split("\n## ")[0]
    for c in found.values():
        assert f"* {c.line()}" in section
    html = open(f"{result.root}/report.html", encoding="utf-8").read()
    after = html.split("How much of the clip does it need?")[1]
    assert "<img" in after.split("<h2")[0] or "<svg" in after.split("<h2")[0]
    assert "correct-first_25" not in " ".join(result.verdicts)  # the verdict reads the controls only
    profile = report.split("## Listening profile")[1].split("\n## ")[0]  # on the first screen, after the verdict
    assert report.index("## Listening profile") < report.index("## Counts")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in profile.splitlines() if line.startswith("| ")}
    assert "mcq · synth: the first 25%, still rising at the last 10%" in rows["listener"]
    assert "mcq · tail: still rising at the first 50%, the last 10%" in rows["listener"]
    assert "mcq · synth: flat (the clip adds nothing)" in rows["text-prior"]
    assert "mcq · synth: accuracy 0.936 on 47 of 72 items" in rows["listener"] or "on 4" in rows["listener"]


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


def _by_hand(per_item: pd.DataFrame, dataset: str) -> tuple[set, set]:
    """(answerable without audio, audio-required) item ids of one benchmark, from the per-item table."""
    rows = per_item[per_item["dataset"] == dataset]
    blind = rows[(rows["condition"] == "text_only") | (rows["model"] == "text-prior")]
    answerable = set(blind.loc[blind["correct"] == 1.0, "item_id"])
    return answerable, set(rows["item_id"]) - answerable


def test_the_items_no_answer_without_audio_got_right_are_the_audio_required_subset(curve_run):
    result, _, _ = curve_run
    per_item = pd.read_parquet(f"{result.root}/tables/per_item.parquet")
    marks = pd.read_parquet(f"{result.root}/tables/answerable_without_audio.parquet")
    required = pd.read_parquet(f"{result.root}/tables/audio_required.parquet")
    for ds in ("synth", "tail", "mucho"):
        answerable, needed = _by_hand(per_item, ds)
        mine = marks[marks["dataset"] == ds]
        assert set(mine.loc[mine["answerable_without_audio"], "item_id"]) == answerable
        assert set(mine.loc[~mine["answerable_without_audio"], "item_id"]) == needed and needed and answerable
        share = required[(required["dataset"] == ds) & (required["metric"] == "answerable_without_audio")]
        assert share["value"].item() == pytest.approx(len(answerable) / (len(answerable) + len(needed)))
        listener = per_item[(per_item["dataset"] == ds) & (per_item["model"] == "listener")
                            & (per_item["condition"] == "correct") & per_item["item_id"].isin(needed)]
        got = required[(required["dataset"] == ds) & (required["model"] == "listener") & (required["kind"] == "value")
                       & (required["condition"] == "correct") & (required["metric"] == "accuracy")]
        assert got["value"].item() == pytest.approx(listener.groupby("item_id")["correct"].mean().mean())
    report = open(f"{result.root}/report.md", encoding="utf-8").read()
    assert "## Which items need the audio?" in report


def test_evalcore_subset_writes_them_in_the_benchmarks_own_format(curve_run, tmp_path):
    from typer.testing import CliRunner

    from evalcore.cli import app
    from evalcore.datasets.items_file import ItemsFile
    from evalcore.datasets.muchomusic import MuChoMusic

    result, _, cfg = curve_run
    per_item = pd.read_parquet(f"{result.root}/tables/per_item.parquet")
    res = CliRunner().invoke(app, ["subset", result.root, "--out", str(tmp_path / "x.csv")])
    assert res.exit_code == 2 and "--benchmark: choose one of mcq/mucho, mcq/synth, mcq/tail" in res.output
    _, needed = _by_hand(per_item, "mucho")
    res = CliRunner().invoke(app, ["subset", result.root, "--benchmark", "mcq/mucho", "--out", str(tmp_path / "m.csv")])
    assert res.exit_code == 0 and f"{len(needed)} audio-required items of 12" in res.output
    params = next(d.params for d in cfg.datasets if d.name == "mucho")
    back = list(MuChoMusic(**{**params, "path": str(tmp_path / "m.csv")}).items(None))
    items = {r["item_id"]: r for r in pd.read_parquet(f"{result.root}/items").to_dict("records")}
    asked = sorted((items[i]["question"], tuple(items[i]["options"]), items[i]["audio_uri"]) for i in needed)
    assert sorted((b["question"], tuple(b["options"]), b["audio_uri"]) for b in back) == asked
    _, needed = _by_hand(per_item, "tail")
    res = CliRunner().invoke(app, ["subset", result.root, "--benchmark", "mcq/tail", "--out", str(tmp_path / "t.jsonl")])
    assert res.exit_code == 0
    assert {r["item_id"] for r in ItemsFile(str(tmp_path / "t.jsonl")).items(None)} == needed
