"""The ``mcq_llm`` matcher as the mcq protocol's judge in a real run (local Ray), against the local
OpenAI-compatible server of tests/llm_server.py on 127.0.0.1."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from evalcore.runconfig.config import parse_config
from evalcore.judges.mcq_string import parse_choice
from evalcore.pipeline.run import run
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key, parenthesised_letter

install_test_key()  # at import, before the session's Ray starts: its workers inherit the key
pytestmark = pytest.mark.ray


def matcher(messages: list[dict]) -> str:
    """A scripted matcher: "none" for the tonality question (recognised by the question the pipeline passes
    on, not by its options), else the letter the answer puts in parentheses."""
    if "What is the tonality of this piece?" in messages[-1]["content"]:
        return "none"
    return parenthesised_letter(messages)


def test_mcq_llm_judge_end_to_end(tmp_path, local_ray) -> None:
    with LLMServer(answer=matcher) as srv:
        cfg = parse_config({
            "name": "llm-mcq",
            "datasets": [{"name": "synth", "kind": "synthetic",
                          "params": {"n_clips": 4, "seconds": 2.0, "seed": 1, "bad_clips": 0}}],
            "models": [{"name": "listener", "kind": "dsp_listener",
                        "resources": {"num_cpus": 0.5, "batch_size": 16}}],
            "protocols": [{"name": "mcq", "conditions": ["correct", "silence", "text_only"], "option_orders": 2,
                           "templates": "muchomusic",
                           "judge": {"kind": "mcq_llm", "params": {
                               "base_url": srv.base_url, "model": "matcher", "rpm": 6000, "tpm": 10_000_000,
                               "api_key_env": TEST_API_KEY_ENV, "cache_root": str(tmp_path / "cache"),
                               "max_retries": 0, "timeout_s": 10}}}],
            "storage": {"root": str(tmp_path / "run")},
            "stats": {"bootstrap_resamples": 200},
            "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
        })
        res = run(cfg)
        sent = len(srv.requests)
    c = res.counts
    n = 4 * 3 * 3 * 2  # clips × mcq questions × conditions × orders
    assert c["requests_in"] == n and c["requests_scored"] == n, c
    assert 0 < sent <= n  # identical (answer, options) pairs are answered from the cache
    per_item = pq.read_table(f"{cfg.root}/tables/per_item.parquet").to_pandas()
    assert len(set(per_item["judge"])) == 1 and per_item["judge"].iloc[0].startswith("mcq_llm@")
    assert set(per_item["variant"]) == {"muchomusic"}
    mode = per_item["task"] == "mode"
    assert (per_item.loc[mode, "parsed_index"] == -1).all()  # the matcher said "none": unanswered, never a guess
    rest = per_item[~mode]
    assert len(rest) == 2 * 4 * 3 * 2
    # elsewhere the matcher's letter is the one a strict parse of the "(X)" answer gives
    assert [int(p) for p in rest["parsed_index"]] == [parse_choice(t, list(o)) for t, o in zip(rest["text"], rest["options"])]
    summary = pq.read_table(f"{cfg.root}/tables/summary.parquet").to_pandas()
    ifr = summary[(summary.metric == "ifr") & (summary.group == "all") & (summary.condition == "correct")]
    assert ifr["value"].iloc[0] == pytest.approx(2 / 3)  # one question in three is the "none" one
    report = open(f"{cfg.root}/report.md").read()
    assert "## Audio-attention test · mcq · synth" in report
    assert "| listener | muchomusic | correct-silence |" in report and "| listener | muchomusic | correct-text_only |" in report
