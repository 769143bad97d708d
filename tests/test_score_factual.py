"""``evalcore score factual`` end to end on small hand-computed inputs (JSONL and Parquet)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from evalcore.cli import app

runner = CliRunner()

GOOD = [
    {"model": "a", "item_id": "1", "response": "A piano and a violin.", "labels": ["Acoustic Grand Piano", "Violin"]},
    {"model": "a", "item_id": "2", "response": "A cello, no piano.", "labels": ["Cello", "Viola"]},
    {"model": "b", "item_id": "1", "response": "Flute and oboe.", "labels": ["Flute"]},
    {"model": "b", "item_id": "2", "response": "I can't tell.", "labels": ["French Horn"]},
]


def _jsonl(path: Path, rows: list, extra_lines: tuple[str, ...] = ()) -> Path:
    lines = [json.dumps(r) for r in rows] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(*args: str):
    return runner.invoke(app, ["score", "factual", *args])


def _metrics(summary: pd.DataFrame, **group) -> dict[str, float]:
    df = summary
    for k, v in group.items():
        df = df[df[k] == v]
    return dict(zip(df["metric"], df["value"]))


def test_jsonl_grouped_by_model_hand_computed(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", GOOD)
    out = tmp_path / "out"
    res = _run(str(src), "--out", str(out), "--task", "instrument", "--resamples", "200")
    assert res.exit_code == 0, res.output
    assert "rows: 4 in = 4 scored + 0 errored" in res.stderr

    per_item = pd.read_parquet(out / "per_item.parquet")
    assert [list(x) for x in per_item["extracted"]] == [["piano", "violin"], ["cello"], ["flute", "oboe"], []]
    assert [list(x) for x in per_item["truth"]] == [["piano", "violin"], ["cello", "viola"], ["flute"], ["horn"]]
    assert per_item[["tp", "fp", "fn"]].to_numpy().tolist() == [[2, 0, 0], [1, 0, 1], [1, 1, 0], [0, 0, 1]]
    assert per_item["error"].isna().all()
    assert list(per_item["model"]) == ["a", "a", "b", "b"] and list(per_item["item_id"]) == ["1", "2", "1", "2"]

    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["metric"]) == {f"{k}_{a}" for k in ("precision", "recall", "f1") for a in ("micro", "macro")}
    assert {"model", "metric", "value", "ci_low", "ci_high", "n", "definition"} <= set(summary.columns)
    assert "item_id" not in summary.columns  # the bootstrap unit, not a group
    a, b = _metrics(summary, model="a"), _metrics(summary, model="b")
    # model a: micro TP 3, FP 0, FN 1; macro over items (1, 1) (1, .5) (1, 2/3)
    assert a["precision_micro"] == pytest.approx(1.0) and a["recall_micro"] == pytest.approx(0.75)
    assert a["f1_micro"] == pytest.approx(6 / 7)
    assert a["precision_macro"] == pytest.approx(1.0) and a["recall_macro"] == pytest.approx(0.75)
    assert a["f1_macro"] == pytest.approx((1 + 2 / 3) / 2)
    # model b: micro TP 1, FP 1, FN 1; macro over items (.5, 1, 2/3) (0, 0, 0)
    assert b["precision_micro"] == pytest.approx(0.5) and b["recall_micro"] == pytest.approx(0.5)
    assert b["f1_micro"] == pytest.approx(0.5)
    assert b["precision_macro"] == pytest.approx(0.25) and b["recall_macro"] == pytest.approx(0.5)
    assert b["f1_macro"] == pytest.approx(1 / 3)
    assert set(summary["n"]) == {2}
    assert (summary["ci_low"] <= summary["value"] + 1e-12).all() and (summary["value"] <= summary["ci_high"] + 1e-12).all()

    labels = pd.read_parquet(out / "per_label.parquet")
    row = labels[(labels["model"] == "a") & (labels["label"] == "viola")].iloc[0]
    assert row["support"] == 1 and row["recall"] == 0 and math.isnan(row["precision"])
    row = labels[(labels["model"] == "b") & (labels["label"] == "oboe")].iloc[0]
    assert row["fp"] == 1 and row["precision"] == 0

    report = (out / "report.md").read_text()
    assert "f1_micro" in report and "| a | f1_micro | 0.857 |" in report


def test_parquet_without_groups(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"response": r["response"], "labels": r["labels"]} for r in GOOD]), src)
    out = tmp_path / "out"
    res = _run(str(src), "--out", str(out), "--task", "instrument", "--resamples", "50", "--seed", "3")
    assert res.exit_code == 0, res.output
    m = _metrics(pd.read_parquet(out / "summary.parquet"))
    # pooled: TP 4, FP 1, FN 2
    assert m["precision_micro"] == pytest.approx(0.8) and m["recall_micro"] == pytest.approx(4 / 6)
    assert m["f1_micro"] == pytest.approx(8 / 11)
    assert m["f1_macro"] == pytest.approx((1 + 2 / 3 + 2 / 3 + 0) / 4)


def test_bad_rows_are_counted_and_kept(tmp_path: Path) -> None:
    bad = [
        {"model": "a", "item_id": "3", "response": 5, "labels": ["Piano"]},
        {"model": "a", "item_id": "4", "response": "piano", "labels": "piano"},
        {"model": "b", "item_id": "3", "response": "piano"},
        {"model": "b", "item_id": "4", "response": "piano", "labels": ["piano", 3]},
        {"model": "b", "item_id": "5", "labels": ["piano"]},
    ]
    src = _jsonl(tmp_path / "in.jsonl", GOOD + bad, ("[1, 2]", "{not json"))
    out = tmp_path / "out"
    res = _run(str(src), "--out", str(out), "--task", "instrument", "--resamples", "50")
    assert res.exit_code == 0, res.output
    assert "rows: 11 in = 4 scored + 7 errored" in res.stderr
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert len(per_item) == 11
    errors = list(per_item["error"].iloc[4:])
    assert errors[0] == "response is not a string (int)"
    assert errors[1] == "labels is not a list of strings"
    assert errors[2] == "labels missing"
    assert errors[3] == "labels is not a list of strings"
    assert errors[4] == "response missing"
    assert "not a JSON object" in errors[5] and "invalid JSON" in errors[6]
    assert per_item["f1"].iloc[4:].isna().all()
    # errored rows do not move the metrics: same values as the clean run
    a = _metrics(pd.read_parquet(out / "summary.parquet"), model="a")
    assert a["f1_micro"] == pytest.approx(6 / 7)
    assert "4 scored + 7 errored" in (out / "report.md").read_text()


def test_group_by_option(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", GOOD)
    res = _run(str(src), "--out", str(tmp_path / "o1"), "--task", "instrument", "--group-by", "item_id",
               "--resamples", "20")
    assert res.exit_code == 0, res.output
    summary = pd.read_parquet(tmp_path / "o1" / "summary.parquet")
    assert "model" not in summary.columns and set(summary["item_id"]) == {"1", "2"}
    # item 1: TP 3 FP 1 FN 0 over models a and b
    assert _metrics(summary, item_id="1")["precision_micro"] == pytest.approx(0.75)
    res = _run(str(src), "--out", str(tmp_path / "o2"), "--task", "instrument", "--group-by", "nope")
    assert res.exit_code == 2 and "nope" in res.stderr


def test_vocab_override(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("lute: oud\npiano\n", encoding="utf-8")
    rows = [{"response": "An oud and a grand piano, and a violin.", "labels": ["Lute", "Piano", "Violin"]},
            {"response": "Two lutes, no piano.", "labels": ["lute"]}]
    src = _jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out"
    res = _run(str(src), "--out", str(out), "--task", "instrument", "--vocab", str(vocab), "--resamples", "20")
    assert res.exit_code == 0, res.output
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert [list(x) for x in per_item["extracted"]] == [["lute", "piano"], ["lute"]]  # violin left the vocabulary
    assert "1 ground-truth label(s) outside the vocabulary" in res.stderr
    assert _metrics(pd.read_parquet(out / "summary.parquet"))["f1_micro"] == pytest.approx(6 / 7)
    # JSON vocabulary
    vocab_json = tmp_path / "vocab.json"
    vocab_json.write_text('["violin"]', encoding="utf-8")
    res = _run(str(src), "--out", str(tmp_path / "o2"), "--task", "instrument", "--vocab", str(vocab_json),
               "--resamples", "20")
    assert res.exit_code == 0, res.output
    assert [list(x) for x in pd.read_parquet(tmp_path / "o2" / "per_item.parquet")["extracted"]] == [["violin"], []]
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}', encoding="utf-8")
    res = _run(str(src), "--out", str(tmp_path / "o3"), "--task", "instrument", "--vocab", str(bad))
    assert res.exit_code == 2 and "bad.json" in res.stderr


GENRES_CSV = ("genre_id,#tracks,parent,title,top_level\n15,100,0,Electronic,15\n181,40,15,Techno,15\n"
              "12,100,0,Rock,12\n25,30,12,Punk,12\n21,50,0,Hip-Hop,21\n")


@pytest.mark.parametrize("task,f1", [("genre-tree", [1.0, 0.0, 1.0, 1.0]), ("genre-node", [0.0, 0.0, 1.0, 0.0]),
                                     ("genre", [0.0, 0.0, 1.0, 1.0])])
def test_genre_hierarchy_tasks(tmp_path: Path, task: str, f1: list[float]) -> None:
    tree = tmp_path / "genres.csv"
    tree.write_text(GENRES_CSV, encoding="utf-8")
    rows = [{"response": "This is techno.", "labels": ["Electronic"]},
            {"response": "Sounds like punk.", "labels": ["Hip-Hop"]},
            {"response": "Hip hop, definitely.", "labels": ["Hip-Hop"]},
            {"response": "Electronic music.", "labels": ["Techno"]}]
    src = _jsonl(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out"
    res = _run(str(src), "--out", str(out), "--task", task, "--tree", str(tree), "--resamples", "20")
    assert res.exit_code == 0, res.output
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert list(per_item["f1"]) == f1
    if task == "genre":  # top-level vocabulary: sub-genres are not extracted, the truth is mapped to the top
        assert [list(x) for x in per_item["extracted"]] == [[], [], ["hip-hop"], ["electronic"]]
    else:
        assert [list(x) for x in per_item["extracted"]] == [["techno"], ["punk"], ["hip-hop"], ["electronic"]]


def test_composer_task(tmp_path: Path) -> None:
    rows = [{"response": "It resembles J. S. Bach more than Mozart.", "labels": ["Bach"]},
            {"response": "Dvořák or Brahms.", "labels": ["Dvorak"]}]
    out = tmp_path / "out"
    res = _run(str(_jsonl(tmp_path / "in.jsonl", rows)), "--out", str(out), "--task", "composer",
               "--resamples", "20")
    assert res.exit_code == 0, res.output
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert [list(x) for x in per_item["extracted"]] == [["bach"], ["dvorak", "brahms"]]
    assert _metrics(pd.read_parquet(out / "summary.parquet"))["precision_micro"] == pytest.approx(2 / 3)


def test_llm_extractor_and_bad_options(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", GOOD)
    res = _run(str(src), "--out", str(tmp_path / "o"), "--task", "instrument", "--extractor", "llm")
    assert res.exit_code != 0 and "LLM judge layer" in res.stderr
    assert not (tmp_path / "o").exists()
    res = _run(str(src), "--out", str(tmp_path / "o"), "--task", "tempo")
    assert res.exit_code == 2 and "tempo" in res.stderr
    res = _run(str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"), "--task", "genre")
    assert res.exit_code == 2 and "cannot read" in res.stderr
    no_labels = _jsonl(tmp_path / "nl.jsonl", [{"response": "piano"}])
    res = _run(str(no_labels), "--out", str(tmp_path / "o"), "--task", "instrument")
    assert res.exit_code == 2 and "labels" in res.stderr


def test_all_rows_bad_exits_non_zero(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", [{"response": 1, "labels": ["piano"]}])
    out = tmp_path / "out"
    res = _run(str(src), "--out", str(out), "--task", "instrument")
    assert res.exit_code == 4 and "rows: 1 in = 0 scored + 1 errored" in res.stderr
    assert len(pd.read_parquet(out / "per_item.parquet")) == 1
