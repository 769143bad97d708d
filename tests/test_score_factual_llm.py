"""``evalcore score factual --extractor llm [--agreement]`` against the local OpenAI-compatible server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalcore.cli import app
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

install_test_key()
runner = CliRunner()

ROWS = [
    {"model": "a", "item_id": "1", "response": "A piano and a violin.", "labels": ["Acoustic Grand Piano", "Violin"]},
    {"model": "a", "item_id": "2", "response": "A cello, no piano.", "labels": ["Cello", "Viola"]},
    {"model": "b", "item_id": "1", "response": "Flute and oboe.", "labels": ["Flute"]},
    {"model": "b", "item_id": "2", "response": "I can't tell.", "labels": ["French Horn"]},
]
FAILING = {"model": "b", "item_id": "3", "response": "Server, please fail on this one.", "labels": ["Oboe"]}

# scripted extractor answers, keyed by the response text shown in the prompt
SCRIPT = {
    "A piano and a violin.": "piano, Violin",          # in vocabulary
    "A cello, no piano.": "cello, piano, kazoo",        # kazoo: out of vocabulary (and piano: an LLM mistake)
    "Flute and oboe.": "flute, saxophone",              # saxophone: not in the MusicNet vocabulary
    "I can't tell.": "none",                            # nothing
}


def scripted(messages: list[dict]) -> str:
    text = re.search(r'"""\n(.*)\n"""', messages[-1]["content"], re.DOTALL).group(1)
    if text not in SCRIPT:
        raise RuntimeError("scripted failure")  # the handler dies: the client sees a connection error
    return SCRIPT[text]


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(src: Path, out: Path, srv: LLMServer | None, cache: Path, *extra: str):
    llm = ["--extractor", "llm", "--llm-model", "judge-model", "--llm-key-env", TEST_API_KEY_ENV,
           "--llm-cache", str(cache), "--llm-max-retries", "0", "--llm-timeout", "5"]
    if srv is not None:
        llm += ["--llm-base-url", srv.base_url]
    return runner.invoke(app, ["score", "factual", str(src), "--out", str(out), "--task", "instrument",
                               "--resamples", "100", *llm, *extra])


def test_llm_extractor_scores_drops_and_errors(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", [*ROWS, FAILING])
    out = tmp_path / "out"
    with LLMServer(answer=scripted) as srv:
        res = _run(src, out, srv, tmp_path / "cache")
        bodies = [json.loads(r.body) for r in srv.requests]
    assert res.exit_code == 0, res.output
    assert len(bodies) == 5
    user = bodies[0]["messages"][1]["content"]
    assert "Category: instrument" in user
    assert "Vocabulary (canonical labels): piano, harpsichord, violin, viola, cello, bass, horn, oboe, bassoon, " \
           "clarinet, flute" in user
    assert "rows: 5 in = 4 scored + 1 errored" in res.stderr

    per_item = pd.read_parquet(out / "per_item.parquet")
    assert [None if x is None else list(x) for x in per_item["extracted"]] == [
        ["piano", "violin"], ["cello", "piano"], ["flute"], [], None]
    assert per_item["dropped"].tolist()[:4] == [0, 1, 1, 0] and pd.isna(per_item["dropped"].iloc[4])
    assert per_item[["tp", "fp", "fn"]].iloc[:4].to_numpy().tolist() == [[2, 0, 0], [1, 1, 1], [1, 0, 0], [0, 0, 1]]
    assert per_item["error"].iloc[:4].isna().all()
    assert per_item["error"].iloc[4].startswith("llm extractor: ")

    summary = pd.read_parquet(out / "summary.parquet")
    b = summary[summary["model"] == "b"]
    m = dict(zip(b["metric"], b["value"]))
    assert m["precision_micro"] == pytest.approx(1.0) and m["recall_micro"] == pytest.approx(0.5)
    assert set(summary["n"]) == {2}  # the errored row is excluded
    report = (out / "report.md").read_text()
    assert "extractor `llm`" in report
    assert "out-of-vocabulary labels dropped by the LLM extractor (not scored): 2" in report
    assert "rows: 5 in = 4 scored + 1 errored" in report
    assert not (out / "agreement.parquet").exists()


def test_cached_rerun_makes_no_calls(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    with LLMServer(answer=scripted) as srv:
        first = _run(src, tmp_path / "o1", srv, tmp_path / "cache")
        n1 = len(srv.requests)
        again = _run(src, tmp_path / "o2", srv, tmp_path / "cache")
        n2 = len(srv.requests)
    assert first.exit_code == 0 and again.exit_code == 0, (first.output, again.output)
    assert n1 == 4 and n2 == 4  # the re-run is served from the cache
    a, b = pd.read_parquet(tmp_path / "o1" / "per_item.parquet"), pd.read_parquet(tmp_path / "o2" / "per_item.parquet")
    assert [list(x) for x in a["extracted"]] == [list(x) for x in b["extracted"]]
    assert a["dropped"].tolist() == b["dropped"].tolist() == [0, 1, 1, 0]


def test_agreement_with_the_lexicon_hand_checked(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", [*ROWS, FAILING])
    out = tmp_path / "out"
    with LLMServer(answer=scripted) as srv:
        res = _run(src, out, srv, tmp_path / "cache", "--agreement")
    assert res.exit_code == 0, res.output
    ag = pd.read_parquet(out / "agreement.parquet")
    assert len(ag) == 4  # the errored row has no LLM labels and is left out
    assert [list(x) for x in ag["llm_labels"]] == [["piano", "violin"], ["cello", "piano"], ["flute"], []]
    assert [list(x) for x in ag["lexicon_labels"]] == [["piano", "violin"], ["cello"], ["flute", "oboe"], []]
    assert ag["exact_match"].tolist() == [True, False, False, True]
    assert ag["jaccard"].tolist() == pytest.approx([1.0, 0.5, 0.5, 1.0])  # two empty lists agree fully
    assert list(ag["model"]) == ["a", "a", "b", "b"] and list(ag["item_id"]) == ["1", "2", "1", "2"]
    # exact 2/4; mean Jaccard 3/4; pooled TP 4, llm-only 1, lexicon-only 1 -> P = R = F1 = 0.8
    report = (out / "report.md").read_text()
    assert ("agreement llm vs lexicon on 4 rows: exact match 0.500, mean Jaccard 0.750, micro F1 0.800 "
            "(P 0.800, R 0.800; lexicon as reference)") in report
    assert "micro F1 0.800" in res.stderr


def test_option_errors(tmp_path: Path) -> None:
    src = _jsonl(tmp_path / "in.jsonl", ROWS)
    res = _run(src, tmp_path / "o", None, tmp_path / "cache")
    assert res.exit_code == 2 and "--llm-base-url" in res.stderr and "--llm-model" not in res.stderr
    res = runner.invoke(app, ["score", "factual", str(src), "--out", str(tmp_path / "o"), "--task", "instrument",
                              "--extractor", "llm", "--llm-base-url", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 2 and "--llm-model" in res.stderr and "--llm-base-url" not in res.stderr
    res = runner.invoke(app, ["score", "factual", str(src), "--out", str(tmp_path / "o"), "--task", "instrument",
                              "--agreement"])
    assert res.exit_code == 2 and "--extractor llm" in res.stderr
    assert not (tmp_path / "o").exists()


def test_vocab_file_is_the_llm_vocabulary(tmp_path: Path) -> None:
    vocab = tmp_path / "v.json"
    vocab.write_text(json.dumps({"piano": [], "cello": []}), encoding="utf-8")
    src = _jsonl(tmp_path / "in.jsonl", ROWS[:2])
    with LLMServer(answer=scripted) as srv:
        res = _run(src, tmp_path / "out", srv, tmp_path / "cache", "--vocab", str(vocab))
        user = json.loads(srv.requests[0].body)["messages"][1]["content"]
    assert res.exit_code == 0, res.output
    assert "Vocabulary (canonical labels): piano, cello\n" in user
    per_item = pd.read_parquet(tmp_path / "out" / "per_item.parquet")
    assert [list(x) for x in per_item["extracted"]] == [["piano"], ["cello", "piano"]]
    assert per_item["dropped"].tolist() == [1, 1]  # violin / kazoo are outside this vocabulary
