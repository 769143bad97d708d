"""A JSONL row whose strings hold U+2028, U+2029 or U+0085 is one row for every JSONL reader."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalcore.core import jsonl
from evalcore.cli import app
from evalcore.datasets.base import DatasetContext
from evalcore.datasets.items_file import ItemsFile

SEPARATORS = ("\u2028", "\u2029", "\u0085")


def _write(path: Path, rows: list[dict]) -> Path:
    # ensure_ascii=False writes the characters themselves, as many JSON writers do
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    return path


def test_lines_split_on_newline_only() -> None:
    data = "{\"a\": \"x\u2028y\u2029z\u0085w\"}\r\n{\"a\": 2}\n".encode()
    got = [(n, json.loads(raw)) for n, raw in jsonl.lines(data) if raw.strip()]
    assert got == [(1, {"a": "x\u2028y\u2029z\u0085w"}), (2, {"a": 2})]
    assert "x\u2028y".splitlines() == ["x", "y"]  # what str.splitlines() would have done


@pytest.mark.parametrize("sep", SEPARATORS)
def test_score_commands_read_one_row(tmp_path: Path, sep: str) -> None:
    runner = CliRunner()
    mcq = _write(tmp_path / "mcq.jsonl", [
        {"question_id": "q1", "order_id": 0, "options": ["a", "b"], "correct_index": 0, "response": f"A{sep}because"},
        {"question_id": "q2", "order_id": 0, "options": ["a", "b"], "correct_index": 1, "response": "B"}])
    res = runner.invoke(app, ["score", "mcq", str(mcq), "--out", str(tmp_path / "m"), "--resamples", "50"])
    assert res.exit_code == 0, res.output
    assert "rows: 2 in = 2 scored + 0 errored" in res.stderr
    factual = _write(tmp_path / "factual.jsonl", [
        {"response": f"A piano{sep}and a violin.", "labels": ["piano", "violin"]}, {"response": "Cello.",
                                                                                   "labels": ["cello"]}])
    res = runner.invoke(app, ["score", "factual", str(factual), "--out", str(tmp_path / "f"), "--task", "instrument",
                              "--resamples", "50"])
    assert res.exit_code == 0, res.output
    assert "rows: 2 in = 2 scored + 0 errored" in res.stderr
    assert list(pd.read_parquet(tmp_path / "f" / "per_item.parquet")["extracted"].map(list)) == [
        ["piano", "violin"], ["cello"]]
    freeform = _write(tmp_path / "ff.jsonl", [
        {"candidate": f"a calm{sep}piano piece", "reference": "a calm piano piece"},
        {"candidate": "loud drums", "reference": "loud drums and bass"}])
    res = runner.invoke(app, ["score", "freeform", str(freeform), "--out", str(tmp_path / "ff"), "--metrics",
                              "bleu,rouge", "--resamples", "50"])
    assert res.exit_code == 0, res.output
    assert len(pd.read_parquet(tmp_path / "ff" / "per_item.parquet")) == 2


def test_items_file_reads_one_row(tmp_path: Path) -> None:
    p = _write(tmp_path / "items.jsonl", [
        {"item_id": "a", "protocol": "factual", "audio_uri": "/x.wav", "question": f"Which{SEPARATORS[0]}instruments?",
         "labels": ["piano"]}])
    rows = list(ItemsFile(str(p)).items(DatasetContext(name="d", run_root=str(tmp_path), seed=0)))
    assert len(rows) == 1 and rows[0]["question"] == f"Which{SEPARATORS[0]}instruments?"
