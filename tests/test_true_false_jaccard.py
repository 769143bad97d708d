"""The factual paper's true/false "Accuracy" (Tables 8 and 9) is the Jaccard index TP / (TP + FP + FN).

Two checks: the paper's own printed P and R imply it (F1 / (2 − F1) = TP / (TP + FP + FN) matches every printed
accuracy of configs/paper/published.csv), and evalcore reports it as ``jaccard_any`` / ``jaccard_majority`` — in
``evalcore score factual --format true_false`` and in a run's scoring stage — on a hand example where it differs
from the share of questions answered right (``accuracy_*``, which counts true negatives).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.runconfig.config import parse_config
from evalcore.pipeline.finish import finish
from evalcore.reports.published import read
from evalcore.scorers.factual_formats import TrueFalseScorer

RULES = ("any", "majority")

# The hand example: 3 yes on a present label (TP), 1 no on a present label (FN), 2 yes on an absent label (FP),
# 4 no on an absent label (TN). P = 3/5, R = 3/4, Jaccard = 3/6; the share answered right is 7/10.
HAND = [("piano", True, "Yes.")] * 3 + [("piano", True, "No.")] + [("oboe", False, "Yes.")] * 2 \
    + [("oboe", False, "No.")] * 4
EXPECTED = {"precision": 0.6, "recall": 0.75, "jaccard": 0.5, "f1": 2 / 3, "accuracy": 0.7}


def test_the_papers_printed_p_and_r_imply_the_jaccard_index() -> None:
    """Per cell of Tables 8 and 9: F1 from the printed P and R, then F1 / (2 − F1), equals the printed accuracy
    (published.csv ``jaccard_*``, sampled against the paper's "Accuracy" row in test_published_values.py)."""
    cells = [c for c in read() if c.paper == "factual" and c.table in ("table8", "table9")]
    by_key = {(c.table, c.model, c.condition, c.metric): float(c.value) for c in cells}
    checked = 0
    for (table, model, condition, metric), printed in by_key.items():
        if not metric.startswith("jaccard_"):
            continue
        rule = metric.removeprefix("jaccard_")
        p = by_key[(table, model, condition, f"precision_{rule}")]
        r = by_key[(table, model, condition, f"recall_{rule}")]
        f1 = 2 * p * r / (p + r)
        assert f1 / (2 - f1) == pytest.approx(printed, abs=0.007), (table, model, condition)
        checked += 1
    assert checked == 12


def _jsonl(path: Path) -> Path:
    rows = [{"model": "m", "item_id": f"rec{i}", "label": label, "truth": truth, "response": text}
            for i, (label, truth, text) in enumerate(HAND)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _check(values: dict[str, float]) -> None:
    for rule in RULES:
        for metric, expected in EXPECTED.items():
            assert values[f"{metric}_{rule}"] == pytest.approx(expected), f"{metric}_{rule}"


def test_score_factual_true_false_reports_jaccard(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", "factual", str(_jsonl(tmp_path / "in.jsonl")), "--out", str(out),
                                   "--task", "instrument", "--format", "true_false", "--resamples", "50"])
    assert res.exit_code == 0, res.output
    summary = pd.read_parquet(out / "summary.parquet")
    whole = summary[summary["group"] == "all"]
    _check(dict(zip(whole["metric"], whole["value"])))
    definitions = dict(zip(whole["metric"], whole["definition"]))
    for rule in RULES:
        assert "TP / (TP + FP + FN)" in definitions[f"jaccard_{rule}"]
        assert "(TP + TN)" in definitions[f"accuracy_{rule}"]
    assert "| jaccard_any | 0.500 |" in (out / "report.md").read_text()


def test_run_scoring_stage_reports_jaccard(tmp_path: Path) -> None:
    """The run's scoring stage (``finish``, after the judge) on the same answers, each question in three
    chunks that agree (so any and majority give one answer)."""
    cfg = parse_config({
        "name": "t", "datasets": [{"name": "d", "kind": "synthetic"}], "models": [{"name": "m", "kind": "null"}],
        "protocols": [{"name": "true_false"}], "storage": {"root": str(tmp_path / "run")},
        "stats": {"bootstrap_resamples": 100}})
    judged = []
    for k, (label, truth, text) in enumerate(HAND):
        answer = ["yes"] if text == "Yes." else ["no"]
        judged += [{"request_id": f"q{k}", "chunk_index": c, "error": None, "error_stage": None, "text": text,
                    "protocol": "true_false", "item_id": f"rec{k}:tf:{label}", "condition": "correct",
                    "labels": ["yes" if truth else "no"], "category": label, "options": [label], "dataset": "d",
                    "task": "instrument", "model": "m", "variant": "default", "option_order": 0, "extracted": answer}
                   for c in range(3)]
    finish(cfg, items_in=len(HAND), item_errors=[], judged=judged)
    s = pq.read_table(f"{cfg.root}/tables/summary.parquet").to_pandas()
    whole = s[(s["kind"] == "value") & (s["group"] == "all")]
    _check(dict(zip(whole["metric"], whole["value"])))
    assert set(whole[whole["metric"] == "jaccard_any"]["definition"]) == \
        {a.definition for a in TrueFalseScorer.aggregates if a.name == "jaccard_any"}


@pytest.mark.ray
def test_a_run_reports_jaccard_on_the_hand_example(tmp_path: Path, local_ray) -> None:
    """The whole ``evalcore run`` (items file → model pool → judge → scoring → report) on the hand example: a
    stand-in model that answers each question's own text ("Yes." / "No."), so the answers are the hand ones."""
    import numpy as np
    import soundfile as sf

    from evalcore.pipeline.run import run

    sf.write(tmp_path / "a.wav", np.zeros(1600, dtype=np.float32), 16_000)
    rows = [{"item_id": f"rec{i}:tf:{label}", "protocol": "true_false", "audio_uri": "a.wav", "question": text,
             "labels": ["yes" if truth else "no"], "options": [label], "category": label}
            for i, (label, truth, text) in enumerate(HAND)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = parse_config({
        "name": "hand",
        "datasets": [{"name": "d", "kind": "items_file", "params": {"path": str(tmp_path / "items.jsonl")}}],
        "models": [{"name": "m", "kind": "simulated_gpu_text", "params": {"seconds_per_batch": 0, "answer": "{prompt}"},
                    "resources": {"num_cpus": 0.5, "batch_size": 16}}],
        "protocols": [{"name": "true_false", "conditions": ["correct"]}], "storage": {"root": str(tmp_path / "run")},
        "stats": {"bootstrap_resamples": 100}, "ray": {"progress_bars": False, "decode_num_cpus": 0.5}})
    res = run(cfg)
    assert res.counts["requests_scored"] == res.counts["requests_in"] == len(HAND)
    s = pq.read_table(f"{cfg.root}/tables/summary.parquet").to_pandas()
    whole = s[(s["kind"] == "value") & (s["group"] == "all")]
    _check(dict(zip(whole["metric"], whole["value"])))
    assert "jaccard_any" in (tmp_path / "run" / "report.md").read_text()
