"""``evalcore score factual --format true_false|binary_choice``: hand-computed examples, bad rows, and
agreement with the pipeline's scorers (:mod:`evalcore.scorers.factual_formats`) on the same answers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.scoring.requests import merge_chunks, per_item_table
from evalcore.scoring.summary import summary_table

runner = CliRunner()


def _tf(item: str, label: str, truth: bool, *responses: str, model: str = "a") -> list[dict]:
    """True/false rows of one (recording, label) question, one per chunk."""
    return [{"model": model, "item_id": item, "label": label, "truth": truth, "chunk_index": k, "response": r}
            for k, r in enumerate(responses)]


def _bc(item: str, options: list[str], correct: int, *responses: str, model: str = "a") -> list[dict]:
    """Binary-choice rows of one item, one per chunk."""
    return [{"model": model, "item_id": item, "options": options, "correct_index": correct, "chunk_index": k,
             "response": r} for k, r in enumerate(responses)]


# rec1 piano (true): any yes ✓ TP, majority no ✗ FN   rec1 violin (false): any yes ✗ FP, majority tie = no ✓ TN
# rec2 cello (true): yes ✓ TP (the hedged chunk is ignored)   rec2 oboe (false): yes ✗ FP
# rec3 flute (true): unanswered ✗ FN   rec3 piano (false): no ✓ TN
TRUE_FALSE = [
    *_tf("rec1", "piano", True, "Yes, there is a piano.", "No.", "No."),
    *_tf("rec1", "violin", False, "No.", "Yes."),
    *_tf("rec2", "cello", True, "Yes.", "Yes.", "It is hard to tell."),
    *_tf("rec2", "oboe", False, "Yes."),
    *_tf("rec3", "flute", True, "Maybe."),
    *_tf("rec3", "piano", False, "No, there is no piano."),
]
# i1 ✓; i2 both named → unanswered; i3 chunks 1, 0, 0 → 0 ✓; i4 ✗; i5 chunks 0, 1 → tie, unanswered
BINARY = [
    *_bc("i1", ["rock", "pop"], 0, "Rock."),
    *_bc("i2", ["jazz", "folk"], 1, "Both jazz and folk."),
    *_bc("i3", ["pop", "rock"], 0, "Rock.", "Pop.", "Pop."),
    *_bc("i4", ["electronic", "hip-hop"], 0, "Hip-hop."),
    *_bc("i5", ["rock", "folk"], 1, "Rock.", "Folk."),
]


def _jsonl(path: Path, rows: list[dict], extra_lines: tuple[str, ...] = ()) -> Path:
    path.write_text("\n".join([*(json.dumps(r) for r in rows), *extra_lines]) + "\n", encoding="utf-8")
    return path


def _run(src: Path, out: Path, fmt: str, task: str, *args: str):
    return runner.invoke(app, ["score", "factual", str(src), "--out", str(out), "--task", task, "--format", fmt,
                               "--resamples", "200", *args])


def _values(summary: pd.DataFrame, group: str = "all") -> dict[str, float]:
    df = summary[summary["group"] == group]
    return dict(zip(df["metric"], df["value"]))


def _nulls(values: pd.Series) -> list:
    """Values with every null (None/NaN after a Parquet round trip) as None."""
    return [None if pd.isna(v) else v for v in values]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def test_true_false_hand_computed_any_vs_majority(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _run(_jsonl(tmp_path / "in.jsonl", TRUE_FALSE), out, "true_false", "instrument")
    assert res.exit_code == 0, res.output
    assert "rows: 11 in = 11 scored + 0 errored" in res.stderr

    per_item = pd.read_parquet(out / "per_item.parquet")
    assert per_item["error"].isna().all()
    assert _nulls(per_item["answer"]) == ["yes", "no", "no", "no", "yes", "yes", "yes", None, "yes", None, "no"]
    assert _nulls(per_item["answer_any"]) == ["yes"] * 9 + [None, "no"]
    assert _nulls(per_item["answer_majority"]) == ["no"] * 5 + ["yes"] * 4 + [None, "no"]
    assert list(per_item["correct_any"]) == [True] * 3 + [False] * 2 + [True] * 3 + [False, False, True]
    assert list(per_item["correct_majority"]) == [False] * 3 + [True] * 2 + [True] * 3 + [False, False, True]

    summary = pd.read_parquet(out / "summary.parquet")
    assert {"model", "group", "metric", "value", "ci_low", "ci_high", "n"} <= set(summary.columns)
    assert "item_id" not in summary.columns and set(summary["model"]) == {"a"}
    v = _values(summary)
    assert set(summary[summary["group"] == "all"]["n"]) == {3}  # bootstrap units: recordings
    # any: 3/6 correct; TP 2 (piano, cello), FP 2 (violin, oboe), FN 1 (flute); 5/6 answered
    assert v["accuracy_any"] == pytest.approx(0.5) and v["answered_any"] == pytest.approx(5 / 6)
    assert v["precision_any"] == pytest.approx(0.5) and v["recall_any"] == pytest.approx(2 / 3)
    assert v["f1_any"] == pytest.approx(4 / 7)
    # majority: 3/6 correct; TP 1 (cello), FP 1 (oboe), FN 2 (rec1 piano, flute)
    assert v["accuracy_majority"] == pytest.approx(0.5) and v["answered_majority"] == pytest.approx(5 / 6)
    assert v["precision_majority"] == pytest.approx(0.5) and v["recall_majority"] == pytest.approx(1 / 3)
    assert v["f1_majority"] == pytest.approx(0.4)
    assert (summary["ci_low"].dropna() <= summary["value"].dropna() + 1e-12).all()

    assert sorted(set(summary["group"])) == ["all", "label=cello", "label=flute", "label=oboe", "label=piano",
                                             "label=violin"]
    piano = _values(summary, "label=piano")  # rec1 (true): any ✓ majority ✗; rec3 (false): ✓ both
    assert piano["accuracy_any"] == 1.0 and piano["accuracy_majority"] == 0.5
    assert piano["recall_any"] == 1.0 and piano["recall_majority"] == 0.0
    assert math.isnan(piano["precision_majority"])  # nothing answered yes: undefined, not 0
    violin = _values(summary, "label=violin")  # false; chunks yes/no: any yes ✗, majority tie → no ✓
    assert violin["accuracy_any"] == 0.0 and violin["accuracy_majority"] == 1.0
    assert "| a | label=piano | accuracy_majority | 0.500 |" in (out / "report.md").read_text()


def test_binary_choice_hand_computed_from_parquet(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(BINARY), src)
    out = tmp_path / "out"
    res = _run(src, out, "binary_choice", "genre")
    assert res.exit_code == 0, res.output
    assert "rows: 8 in = 8 scored + 0 errored" in res.stderr
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert list(per_item["parsed_index"]) == [0, -1, 1, 0, 0, 1, 0, 1]
    assert list(per_item["choice"]) == [0, -1, 0, 0, 0, 1, -1, -1]
    assert list(per_item["correct"]) == [True, False, True, True, True, False, False, False]
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["group"]) == {"all"} and set(summary["n"]) == {5}
    v = _values(summary)
    assert set(v) == {"precision_micro", "recall_micro", "f1_micro", "accuracy", "answered", "accuracy_answered"}
    assert v["accuracy"] == pytest.approx(2 / 5) and v["answered"] == pytest.approx(3 / 5)
    assert v["accuracy_answered"] == pytest.approx(2 / 3)
    # labels named, united over chunks, vs the correct option: i1 rock ✓; i2 jazz+folk (TP, FP); i3 rock+pop
    # (TP, FP); i4 hip-hop for electronic (FP, FN); i5 rock+folk (TP, FP) → TP 4, FP 4, FN 1
    assert list(per_item["named"].map(list)) == [["rock"], ["jazz", "folk"], ["rock"], ["pop"], ["pop"],
                                                 ["hip-hop"], ["rock"], ["folk"]]
    assert v["precision_micro"] == pytest.approx(4 / 8) and v["recall_micro"] == pytest.approx(4 / 5)
    assert v["f1_micro"] == pytest.approx(8 / 13)


def test_without_item_id_every_row_is_a_question(tmp_path: Path) -> None:
    rows = [{"label": "piano", "truth": True, "response": r} for r in ("Yes.", "No.", "No.")]
    out = tmp_path / "out"
    res = _run(_jsonl(tmp_path / "in.jsonl", rows), out, "true_false", "instrument")
    assert res.exit_code == 0, res.output
    summary = pd.read_parquet(out / "summary.parquet")
    v = _values(summary)
    assert v["accuracy_any"] == pytest.approx(1 / 3) and v["accuracy_majority"] == pytest.approx(1 / 3)
    assert set(summary["n"]) == {3}


def test_true_false_bad_rows_are_counted_and_do_not_change_the_scores(tmp_path: Path) -> None:
    good = tmp_path / "good"
    assert _run(_jsonl(tmp_path / "good.jsonl", TRUE_FALSE), good, "true_false", "instrument").exit_code == 0
    bad = [
        {"model": "a", "item_id": "rec4", "label": "piano", "truth": True},
        {"model": "a", "item_id": "rec4", "label": "piano", "truth": True, "response": 7},
        {"model": "a", "item_id": "rec4", "truth": True, "response": "Yes."},
        {"model": "a", "item_id": "rec4", "label": ["piano"], "truth": True, "response": "Yes."},
        {"model": "a", "item_id": "rec4", "label": "piano", "response": "Yes."},
        {"model": "a", "item_id": "rec4", "label": "piano", "truth": "yes", "response": "Yes."},
        {"model": "a", "item_id": "rec4", "label": "piano", "truth": True, "response": "Yes.", "chunk_index": -1},
        {"model": "a", "item_id": None, "label": "piano", "truth": True, "response": "Yes."},
        *_tf("rec5", "flute", True, "Yes."), {**_tf("rec5", "flute", False, "No.")[0], "chunk_index": 1},
        *_tf("rec6", "oboe", True, "Yes."), *_tf("rec6", "oboe", True, "No."),  # chunk 0 twice
    ]
    out = tmp_path / "out"
    res = _run(_jsonl(tmp_path / "in.jsonl", TRUE_FALSE + bad, ("[1]", "{nope")), out, "true_false", "instrument")
    assert res.exit_code == 0, res.output
    assert "rows: 25 in = 11 scored + 14 errored" in res.stderr
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert len(per_item) == 25 and per_item["error"].iloc[:11].isna().all()
    assert list(per_item["error"].iloc[11:]) == [
        "response missing", "response is not a string (int)", "label missing", "label is not a non-empty string",
        "truth missing", "truth is not a boolean (str)", "chunk_index -1 is not a non-negative integer",
        "item_id missing", *["chunks of one question disagree on truth"] * 2,
        *["chunk_index repeated within one question"] * 2, "line 24: not a JSON object",
        "line 25: invalid JSON (Expecting property name enclosed in double quotes)"]
    assert per_item["answer"].iloc[11:].isna().all() and per_item["correct_any"].iloc[11:].isna().all()
    got, want = pd.read_parquet(out / "summary.parquet"), pd.read_parquet(good / "summary.parquet")
    pd.testing.assert_frame_equal(got, want)


def test_binary_choice_bad_rows(tmp_path: Path) -> None:
    bad = [
        {"item_id": "b1", "options": ["rock", "pop", "jazz"], "correct_index": 0, "response": "Rock."},
        {"item_id": "b2", "options": "rock, pop", "correct_index": 0, "response": "Rock."},
        {"item_id": "b3", "options": ["rock", 3], "correct_index": 0, "response": "Rock."},
        {"item_id": "b4", "correct_index": 0, "response": "Rock."},
        {"item_id": "b5", "options": ["rock", "pop"], "correct_index": 2, "response": "Rock."},
        {"item_id": "b6", "options": ["rock", "pop"], "correct_index": True, "response": "Rock."},
        {"item_id": "b7", "options": ["rock", "pop"], "response": "Rock."},
        {"item_id": "b8", "options": ["Rock", "rock"], "correct_index": 0, "response": "Rock."},
        {"item_id": "b9", "options": ["rock", "pop"], "correct_index": 0},
        *_bc("b10", ["rock", "pop"], 0, "Rock."), *_bc("b10", ["pop", "rock"], 1, "Rock.", "Pop.")[1:],
    ]
    out = tmp_path / "out"
    res = _run(_jsonl(tmp_path / "in.jsonl", [{k: v for k, v in r.items() if k != "model"} for r in BINARY + bad]),
               out, "binary_choice", "genre")
    assert res.exit_code == 0, res.output
    assert "rows: 19 in = 8 scored + 11 errored" in res.stderr
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert list(per_item["error"].iloc[8:]) == [
        *["options is not a list of two strings"] * 3, "options missing", "correct_index 2 is not 0 or 1",
        "correct_index True is not 0 or 1", "correct_index missing",
        "options ['Rock', 'rock'] name the same label twice", "response missing",
        *["chunks of one question disagree on options, correct_index"] * 2]
    assert per_item["choice"].iloc[8:].isna().all()
    assert _values(pd.read_parquet(out / "summary.parquet"))["accuracy"] == pytest.approx(2 / 5)


def test_no_scorable_row_exits_1_and_option_errors_exit_2(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", [{"label": "piano", "truth": None, "response": "Yes."}])
    res = _run(src, tmp_path / "out", "true_false", "instrument")
    assert res.exit_code == 4 and "rows: 1 in = 0 scored + 1 errored" in res.stderr
    assert (tmp_path / "out" / "per_item.parquet").exists()
    assert _run(src, tmp_path / "o2", "multiple", "instrument").exit_code == 2
    res = _run(src, tmp_path / "o3", "true_false", "instrument", "--extractor", "llm")
    assert res.exit_code == 2 and "--format standard only" in res.stderr
    res = _run(src, tmp_path / "o4", "binary_choice", "genre")
    assert res.exit_code == 2 and "missing required column(s) ['options', 'correct_option (or correct_index)']" in res.stderr
    res = _run(src, tmp_path / "o5", "true_false", "instrument", "--group-by", "truth")
    assert res.exit_code == 2 and "--group-by" in res.stderr


# --------------------------------------------------------------------------- same numbers as the pipeline

def _pipeline_summary(per_item: pd.DataFrame, protocol: str) -> dict[tuple, tuple[float, int]]:
    """The run's summary (:func:`summary_table`) of the same chunk answers: {(model, group, metric): (value, n)}."""
    judged = []
    for i, r in enumerate(per_item.to_dict("records")):
        key = f"{r['item_id']}:tf:{r['label']}" if protocol == "true_false" else str(r["item_id"])
        answer = ({"yes": ["yes"], "no": ["no"]}.get(r["answer"], []) if protocol == "true_false"
                  else list(r["named"]))
        judged.append({"request_id": f"{r['model']}/{key}", "protocol": protocol, "dataset": "d", "task": "t",
                       "model": r["model"], "variant": "v", "condition": "correct", "option_order": 0,
                       "item_id": key, "chunk_index": int(r["chunk_index"]), "error": None, "error_stage": None,
                       "category": r.get("label"), "labels": ["yes" if r.get("truth") else "no"],
                       "extracted": answer, "parsed_index": r.get("parsed_index"),
                       "options": list(r.get("options", [])), "correct_index": r.get("correct_index")})
    table = summary_table(per_item_table(merge_chunks(judged)), resamples=50, confidence=0.95, seed=0).to_pandas()
    # the run's explicit denominators (errored requests per cell) have no counterpart in `evalcore score`,
    # whose input rows are counted in its report
    table = table[(table["kind"] == "value") & (table["metric"] != "errored")
                  & ~table["metric"].str.endswith("_with_errors")]
    return {(m, g, k): (v, n) for m, g, k, v, n in zip(table["model"], table["group"], table["metric"],
                                                        table["value"], table["n"])}


def _cli_summary(summary: pd.DataFrame) -> dict[tuple, tuple[float, int]]:
    return {(m, g, k): (v, n) for m, g, k, v, n in zip(summary["model"], summary["group"], summary["metric"],
                                                        summary["value"], summary["n"])}


def _assert_same(cli: dict[tuple, tuple[float, int]], pipeline: dict[tuple, tuple[float, int]]) -> None:
    assert cli and set(cli) == set(pipeline)
    for key, (value, n) in cli.items():
        assert _same(value, pipeline[key][0]) and n == pipeline[key][1], key


def test_true_false_numbers_equal_the_pipeline_scorer(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    pool = ["Yes.", "No.", "Maybe.", "There is no piano here.", "A violin and a cello.", "Definitely not."]
    rows = []
    for model in ("a", "b"):
        for rec in range(6):
            for label in ["piano", "violin", "cello", "flute"][: 1 + rec % 4]:  # recordings of unequal size
                chunks = [str(x) for x in rng.choice(pool, size=1 + int(rng.integers(0, 4)))]
                rows += _tf(f"r{rec}", label, bool(rng.integers(0, 2)), *chunks, model=model)
    out = tmp_path / "out"
    assert _run(_jsonl(tmp_path / "in.jsonl", rows), out, "true_false", "instrument").exit_code == 0
    per_item = pd.read_parquet(out / "per_item.parquet")
    summary = pd.read_parquet(out / "summary.parquet")
    assert _values(summary[summary["model"] == "a"])["accuracy_any"] != \
        _values(summary[summary["model"] == "a"])["accuracy_majority"]  # the example separates the rules
    _assert_same(_cli_summary(summary), _pipeline_summary(per_item, "true_false"))


def test_binary_choice_numbers_equal_the_pipeline_scorer(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    pool = ["Rock.", "Pop.", "Both.", "The first one.", "The latter.", "Probably rock."]
    rows = []
    for model in ("a", "b"):
        for item in range(12):
            chunks = [str(x) for x in rng.choice(pool, size=1 + int(rng.integers(0, 3)))]
            rows += _bc(f"i{item}", ["rock", "pop"], int(rng.integers(0, 2)), *chunks, model=model)
    out = tmp_path / "out"
    assert _run(_jsonl(tmp_path / "in.jsonl", rows), out, "binary_choice", "genre").exit_code == 0
    _assert_same(_cli_summary(pd.read_parquet(out / "summary.parquet")),
                 _pipeline_summary(pd.read_parquet(out / "per_item.parquet"), "binary_choice"))
