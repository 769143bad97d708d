"""`evalcore score freeform` on real MusicQA references."""

from __future__ import annotations

import json
import pathlib

import pandas as pd
import pytest
from nltk.translate.bleu_score import sentence_bleu
from typer.testing import CliRunner

from evalcore.cli import app

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "musicqa" / "EvalMusicQA.json"


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    if not DATA.exists():
        pytest.skip(f"real MusicQA data not found at {DATA}")
    refs = [r["conversation"][1]["value"] for r in json.loads(DATA.read_text())[:40]]
    rows = []
    for i, ref in enumerate(refs):
        rows.append({"item_id": f"i{i}", "model": "m", "condition": "correct", "candidate": ref[: len(ref) // 2],
                     "reference": ref})
        rows.append({"item_id": f"i{i}", "model": "m", "condition": "random", "candidate": refs[(i + 7) % 40],
                     "reference": ref})
        rows.append({"item_id": f"i{i}", "model": "m", "condition": "paraphrase", "candidate": ref.lower(),
                     "reference": ref})
    rows.append({"item_id": "x", "model": "m", "condition": "correct", "candidate": 7, "reference": "a"})
    p = tmp_path_factory.mktemp("ff") / "pairs.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    return p


def test_scores_counts_and_contrasts(pairs_file, tmp_path):
    res = CliRunner().invoke(app, ["score", "freeform", str(pairs_file), "--out", str(tmp_path), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    per_item = pd.read_parquet(tmp_path / "per_item.parquet")
    assert len(per_item) == 122 and per_item["error"].notna().sum() == 2
    row = per_item[(per_item.item_id == "i3") & (per_item.condition == "random")].iloc[0]
    assert row["bleu"] == pytest.approx(sentence_bleu([row["reference"]], row["candidate"]), abs=1e-9)
    summary = pd.read_parquet(tmp_path / "summary.parquet")
    diff = summary[(summary.kind == "paired_diff") & (summary.condition == "correct-random")]
    assert set(diff["metric"]) == {"bleu", "bleu4", "meteor", "rouge"} and (diff["n"] == 40).all()
    assert summary["definition"].str.contains("nltk").all()
    report = (tmp_path / "report.md").read_text()
    assert "rows: 122 in = 120 scored + 2 errored" in report and "| m | correct | 40 |" in report


@pytest.mark.parametrize("args,needle", [
    (["--metrics", "bleu,claptext"], "not built yet"),
    (["--metrics", "bleurt"], "unknown --metrics"),
    (["--profile", "fancy"], "unknown --profile"),
    (["--group-by", "nope"], "no such grouping column"),
])
def test_argument_errors(pairs_file, tmp_path, args, needle):
    res = CliRunner().invoke(app, ["score", "freeform", str(pairs_file), "--out", str(tmp_path), *args])
    assert res.exit_code == 2 and needle in res.output
