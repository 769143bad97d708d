"""``evalcore score mcq --parser llm``: the mcq_llm judge over real HTTP against tests/llm_server.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from evalcore.cli import app
from llm_server import TEST_API_KEY_ENV, FaultSchedule, LLMServer, install_test_key

install_test_key()
runner = CliRunner()

OPTS = ["Piano", "Violin", "Trumpet", "Guitar"]
# what the scripted matcher answers for each model response (found between the prompt's triple quotes)
SCRIPT = {
    "Probably the second one, the violin.": "B",
    "I really cannot tell from this clip.": "none",
    "Some brass, maybe.": "Well, it could be A or it could be C, hard to say",  # garbage → unanswered
}
FAIL = "This one makes the matcher API fail."


def matcher(messages: list[dict]) -> str:
    m = re.search(r'"""\n(.*)\n"""', messages[-1]["content"], re.DOTALL)
    response = m.group(1) if m else ""
    if response == FAIL:
        raise RuntimeError("scripted failure")  # the connection drops: an API error for the client
    return SCRIPT[response]


def rows() -> list[dict]:
    return [
        {"question_id": "q1", "order_id": 0, "model": "m", "options": OPTS, "correct_index": 1,
         "response": "Probably the second one, the violin."},
        {"question_id": "q1", "order_id": 1, "model": "m", "options": OPTS[::-1], "correct_index": 2,
         "response": "I really cannot tell from this clip."},
        {"question_id": "q2", "order_id": 0, "model": "m", "options": OPTS, "correct_index": 2,
         "response": "Some brass, maybe."},
        {"question_id": "q2", "order_id": 1, "model": "m", "options": OPTS, "correct_index": 2, "response": FAIL},
        {"question_id": "q3", "order_id": 0, "model": "m", "options": [*OPTS, "Drums"], "correct_index": 0,
         "response": "Probably the second one, the violin."},  # five options: the judge refuses, not sent
        {"question_id": "q4", "order_id": 0, "model": "m", "options": OPTS, "correct_index": 0, "response": None},
    ]


def run(src: str, out: Path, srv: LLMServer, cache: Path, *extra: str):
    return runner.invoke(app, ["score", "mcq", src, "--out", str(out), "--parser", "llm",
                               "--llm-base-url", srv.base_url, "--llm-model", "matcher",
                               "--llm-key-env", TEST_API_KEY_ENV, "--llm-cache", str(cache),
                               "--llm-max-retries", "0", "--llm-timeout", "5", "--resamples", "20", *extra])


def test_llm_parser_scripted_answers_errors_and_cached_rerun(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    cache = tmp_path / "cache"
    with LLMServer(answer=matcher) as srv:
        res = run(str(src), tmp_path / "o1", srv, cache)
        first = [json.loads(r.body) for r in srv.requests]
    assert res.exit_code == 0, res.output
    assert "rows: 6 in = 3 scored + 3 errored" in res.stderr
    assert len(first) == 4  # the five-option row and the missing response are never sent
    assert {b["model"] for b in first} == {"matcher"}
    per_item = pd.read_parquet(tmp_path / "o1" / "per_item.parquet")
    assert per_item["parsed_index"].tolist()[:3] == [1, -1, -1]  # "B", "none", garbage → never a guess
    assert per_item["correct"].tolist()[:3] == [True, False, False]
    assert per_item["error"].isna().tolist() == [True, True, True, False, False, False]
    errors = per_item["error"].tolist()
    assert errors[3].startswith("llm parser: ")  # the API failure is that row's error
    assert errors[4] == "llm parser: mcq_llm supports at most 4 options, got 5" and errors[5] == "no response"
    assert per_item["parsed_index"].isna().tolist()[3:] == [True, True, True]
    s = pd.read_parquet(tmp_path / "o1" / "summary.parquet").set_index("metric")
    # q1: orders ✓, unanswered → 1/2; q2: order 0 wrong (order 1 errored) → 0 → mean 1/4; IFR 1/3
    assert s.loc["accuracy_mean", "value"] == 0.25 and s.loc["ifr", "value"] == 1 / 3 and s.loc["ifr", "n"] == 2
    report = (tmp_path / "o1" / "report.md").read_text()
    assert "Parser: `llm`. Rows: 6 in = 3 scored + 3 errored." in report
    assert "- parser agreement strict vs muchomusic:" in report
    # strict reads the violin row by its option text (B) and leaves the other two unanswered, like the matcher
    assert "- parser agreement llm vs strict: 1.000 over 3 responses" in report

    # a re-run with the same cache: only the failed (uncached) item is asked again, then nothing at all
    with LLMServer(answer=lambda m: "C") as srv:
        res = run(str(src), tmp_path / "o2", srv, cache)
        n2 = len(srv.requests)
    assert res.exit_code == 0, res.output
    assert n2 == 1
    assert "rows: 6 in = 4 scored + 2 errored" in res.stderr
    with LLMServer(answer=lambda m: "A") as srv:
        res = run(str(src), tmp_path / "o3", srv, cache)
        assert srv.requests == []  # zero calls on a fully cached re-run
    assert res.exit_code == 0, res.output
    p3 = pd.read_parquet(tmp_path / "o3" / "per_item.parquet")["parsed_index"].tolist()
    assert p3[:4] == [1, -1, -1, 2]  # answers from the cache, not from the new server


def test_llm_parser_all_calls_failing_are_errors(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows()[:3]))
    with LLMServer(answer=matcher, faults=FaultSchedule(probabilities={"500": 1.0})) as srv:
        res = run(str(src), tmp_path / "o", srv, tmp_path / "cache", "--group-by", "", "--breakdown", "model")
    assert res.exit_code == 4, res.output  # nothing could be scored (the outputs are written all the same)
    assert "rows: 3 in = 0 scored + 3 errored" in res.stderr
    per_item = pd.read_parquet(tmp_path / "o" / "per_item.parquet")
    assert all(e.startswith("llm parser: HTTP 500") for e in per_item["error"])
    assert pd.read_parquet(tmp_path / "o" / "summary.parquet").empty
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_question_column_is_shown_to_the_matcher(tmp_path: Path) -> None:
    """With a ``question`` input column the matcher sees each row's question (else a placeholder)."""
    src = tmp_path / "in.jsonl"
    qs = ["Which instrument plays the melody?", "Which instrument enters last?"]
    src.write_text("".join(json.dumps({"question_id": f"q{i}", "order_id": 0, "options": OPTS, "correct_index": 1,
                                       "question": q, "response": "The violin."}) + "\n" for i, q in enumerate(qs)))

    def by_question(messages: list[dict]) -> str:
        return "B" if qs[0] in messages[-1]["content"] else "none"

    with LLMServer(answer=by_question) as srv:
        res = run(str(src), tmp_path / "out", srv, tmp_path / "cache")
    assert res.exit_code == 0, res.output
    got = pd.read_parquet(tmp_path / "out" / "per_item.parquet")["parsed_index"].tolist()
    assert got == [1, -1]  # only the first row's prompt held its question
