"""``evalcore score cmi`` (CMI-Bench's released output files, scored without a model) and ``evalcore score mcq``'s
parsers for the MCQ music benchmarks' rules: rows in = scored + errored, error rows with their reasons, controls from
another harness's rows, the released print lines beside the figures."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from typer.testing import CliRunner

from evalcore.cli import app

runner = CliRunner()
KEY_Q = "Estimate the musical key of the given audio."


def _rows(*pairs: tuple[str, str]) -> list[dict]:
    return [{"question": KEY_Q, "response": r, "correct_answer": a, "audioid": f"../testdata/GS-key/{i}.wav",
             "other": ""} for i, (r, a) in enumerate(pairs)]


def test_released_files_scored_with_error_rows_and_print_lines(tmp_path: Path) -> None:
    results = tmp_path / "results" / "mymodel"
    results.mkdir(parents=True)
    released = _rows(("C major", "C major"), ("G major", "C major"), ("A minor", "C major"), ("", "C major"))
    released.append({"question": KEY_Q, "correct_answer": "D major"})  # no response: an error row
    released.append(["not", "an", "object"])
    (results / "mymodel_GS_key.jsonl").write_text(json.dumps(released, indent=4))  # a JSON list, as released
    (results / "notes.jsonl").write_text("[]")  # not a task file: listed as not scored
    out = tmp_path / "out"
    res = runner.invoke(app, ["score", "cmi", str(tmp_path / "results"), "--out", str(out), "--resamples", "20"])
    assert res.exit_code == 0, res.output
    assert "rows: 6 in = 4 scored + 2 errored" in res.output
    summary = pq.read_table(out / "summary.parquet").to_pandas()
    v = summary[(summary.metric == "key_weighted_score") & (summary.kind == "value") & (summary.group == "all")]
    assert v["value"].tolist() == [(1.0 + 0.5 + 0.3 + 0.0) / 4] and v["model"].tolist() == ["mymodel"]
    report = (out / "report.md").read_text()
    assert "mymodel_GS_key G-Mean: 0.4500" in report  # the line evaluate.py prints for this figure
    assert "notes.jsonl: not a CMI-Bench task file" in report
    # the folder's file whose name names no task is said on the terminal, with the task names it could end in
    (skip,) = [ln for ln in res.stderr.splitlines() if "skipped" in ln]
    assert skip.startswith("evalcore score cmi: skipped ") and "notes.jsonl" in skip
    assert "its name ends in no task's name; tasks: GTZAN, " in skip and "MTG_top50tags" in skip and "GS_key" in skip
    errors = pq.read_table(out / "errors.parquet").to_pandas()
    assert sorted(errors["error"]) == ["CMI-Bench output record is not an object: \"['not', 'an', 'object']\"",
                                       "no response (text)"]


def test_rows_from_another_harness_with_controls_get_paired_differences(tmp_path: Path) -> None:
    rows = []
    for i in range(6):
        rows.append({"item_id": f"k{i}", "condition": "correct", "response": "C major", "correct_answer": "C major"})
        rows.append({"item_id": f"k{i}", "condition": "silence", "response": "F# minor", "correct_answer": "C major"})
    path = tmp_path / "harness_GS_key.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # JSON Lines
    out = tmp_path / "out"
    res = runner.invoke(app, ["score", "cmi", str(path), "--out", str(out), "--resamples", "20"])
    assert res.exit_code == 0, res.output
    s = pq.read_table(out / "summary.parquet").to_pandas()
    d = s[(s.kind == "paired_diff") & (s.metric == "key_weighted_score") & (s.group == "all")]
    assert d["condition"].tolist() == ["correct-silence"] and d["value"].tolist() == [1.0] and d["n"].tolist() == [6]


def test_nothing_scoreable_exits_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "m_GS_key.jsonl"
    path.write_text(json.dumps([{"question": KEY_Q}]))
    res = runner.invoke(app, ["score", "cmi", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code != 0 and "no response" in res.output


def test_score_mcq_with_the_benchmarks_parsers(tmp_path: Path) -> None:
    options = ["Male speech", "Female speech", "Piano"]
    rows = [{"question_id": "q1", "order_id": 0, "options": options, "correct_index": 0, "response": r}
            for r in ("Male speech.", "(A)", "Male speech, not female speech")]
    path = tmp_path / "in.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    got = {}
    for parser in ("strict", "mmau", "mmar", "rul", "mmau-pro-bow"):
        out = tmp_path / parser
        res = runner.invoke(app, ["score", "mcq", str(path), "--out", str(out), "--parser", parser, "--resamples", "10"])
        assert res.exit_code == 0, (parser, res.output)
        got[parser] = pq.read_table(out / "per_item.parquet").to_pandas()["parsed_index"].tolist()
    # MMAU's word-set rule (MMAR keeps it): a bare letter matches nothing, another option's word spoils the match
    assert got["mmau"] == got["mmar"] == [0, -1, -1]
    assert got["strict"][:2] == [0, 0]
    assert len(got["rul"]) == len(got["mmau-pro-bow"]) == 3


def test_score_mcq_reads_the_released_mmau_and_mmar_outputs(tmp_path: Path) -> None:
    recs = [{"id": "a", "choices": ["Male speech", "Female speech"], "answer": "Male speech", "task": "music",
             "model_output": "Male speech."},
            {"id": "b", "choices": ["Piano", "Guitar"], "answer": "Guitar", "task": "music",
             "model_output": "It is (B)"},
            {"id": "c", "choices": ["Piano", "Guitar"], "answer": "Guitar", "task": "sound"}]  # no model_output
    path = tmp_path / "mmau-test-mini-with-outputs.json"
    path.write_text(json.dumps(recs))
    out = tmp_path / "out"
    res = runner.invoke(app, ["score", "mcq", str(path), "--released", "mmau", "--parser", "mmau", "--out", str(out),
                              "--resamples", "10"])
    assert res.exit_code == 0, res.output
    assert "rows: 3 in = 2 scored + 1 errored" in res.output  # the released scorer skips "c"; counted here
    per_item = pq.read_table(out / "per_item.parquet").to_pandas()
    assert per_item["correct"].tolist()[:2] == [True, False]  # a bare letter matches nothing under MMAU's rule
    assert "released scorer skips" in str(per_item["error"].iloc[2])
    mmar = [{**r, "answer_prediction": r.pop("model_output", None), "modality": "music"} for r in recs[:2]]
    path.write_text("".join(json.dumps(r) + "\n" for r in mmar))
    res = runner.invoke(app, ["score", "mcq", str(path), "--released", "mmar", "--parser", "mmar", "--out",
                              str(tmp_path / "out2"), "--resamples", "10"])
    assert res.exit_code == 0 and "rows: 2 in = 2 scored + 0 errored" in res.output, res.output
