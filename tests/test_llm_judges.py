"""The LLM judges (llm_extractor, mcq_llm) over real HTTP against tests/llm_server.py."""

from __future__ import annotations

import dataclasses
import json
import pickle
import re

import pytest

from evalcore.judges.llm_judges import LLMExtractorJudge, McqLLMJudge, validate_labels
from evalcore.llm.cache import ResponseCache, cache_key
from evalcore.llm.prompts import LABEL_EXTRACTION, MCQ_MATCH
from evalcore.judges.base import JUDGES
from llm_server import TEST_API_KEY_ENV, FaultSchedule, LLMServer, install_test_key

KEY = install_test_key()


def echo(messages: list[dict]) -> str:
    """The 'model' answers with the text between the triple quotes of the prompt."""
    m = re.search(r'"""\n(.*)\n"""', messages[-1]["content"], re.DOTALL)
    return m.group(1) if m else ""


def params(srv: LLMServer, tmp_path, **kw) -> dict:
    p = dict(base_url=srv.base_url, model="judge-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
             tpm=10_000_000, timeout_s=2.0, max_retries=2, cache_root=str(tmp_path / "cache"),
             backoff_base_s=0.01, backoff_max_s=0.05)
    p.update(kw)
    return p


def test_extractor_drops_out_of_vocabulary_labels_and_counts_them(tmp_path):
    texts = ["Piano, kazoo, VIOLIN, piano.", "none", "", "- theremin\n- banjo\n- theremin", None, "drums"]
    with LLMServer(answer=echo) as srv:
        judge = JUDGES.build("llm_extractor", **params(srv, tmp_path, vocabulary="instrument"))
        out = judge.judge(texts, [None] * len(texts))
        bodies = [json.loads(r.body) for r in srv.requests]
    assert out == [
        {"extracted": ["piano", "violin"], "dropped": 1},
        {"extracted": [], "dropped": 0},
        {"extracted": [], "dropped": 0},
        {"extracted": [], "dropped": 2},  # distinct out-of-vocabulary terms; never scored
        {"extracted": None, "error": "no response"},
        {"extracted": ["drums"], "dropped": 0},
    ]
    assert len(bodies) == 5  # the missing response is not sent
    user = bodies[0]["messages"][1]["content"]
    assert "Category: instrument" in user and "guitar, drums, bass" in user
    assert bodies[0]["messages"][0]["content"] == LABEL_EXTRACTION.system and bodies[0]["temperature"] == 0.0
    assert judge.version == "2+label_extraction@1"

    with LLMServer(answer=echo) as srv:
        custom = LLMExtractorJudge(vocabulary=["Rock", "jazz"], **params(srv, tmp_path))
        assert custom.judge(["rock, pop, Jazz, jazz-like"], [None]) == [{"extracted": ["Rock", "jazz"], "dropped": 2}]
        assert "Category: label" in json.loads(srv.requests[0].body)["messages"][1]["content"]
    assert validate_labels("None.", ["rock"]) == ([], 0) and validate_labels('"rock"', ["rock"]) == (["rock"], 0)
    with pytest.raises(KeyError):
        LLMExtractorJudge(vocabulary="no-such-vocab", **params(srv, tmp_path))


def test_prompt_version_is_part_of_the_cache_key_and_rerun_is_free(tmp_path, monkeypatch):
    texts = [f"piano, item {i}" for i in range(6)]
    monkeypatch.setenv("EVALCORE_LLM_CACHE", str(tmp_path / "envcache"))
    with LLMServer(answer=echo) as srv:
        p = params(srv, tmp_path)
        del p["cache_root"]  # from $EVALCORE_LLM_CACHE
        first = JUDGES.build("llm_extractor", **json.loads(json.dumps(p)))  # as judge_batch builds it
        out1 = first.judge(texts, [None] * 6)
        n1 = len(srv.requests)
        again = pickle.loads(pickle.dumps(LLMExtractorJudge(**p)))  # fresh process-like copy
        out2 = again.judge(texts, [None] * 6)
        n2 = len(srv.requests)
        v2 = LLMExtractorJudge(**p)
        v2.template = dataclasses.replace(LABEL_EXTRACTION, version="2")  # same words, new version
        out3 = v2.judge(texts, [None] * 6)
        n3 = len(srv.requests)
    assert n1 == 6 and n2 == 6 and n3 == 12  # cached re-run: zero HTTP calls; new version: all new
    assert out1 == out2 == out3 and out1[0] == {"extracted": ["piano"], "dropped": 1}
    assert first.cache_root == str(tmp_path / "envcache") and v2.version == "2+label_extraction@2"
    cache = ResponseCache(str(tmp_path / "envcache"))
    msgs = first.messages(texts[0])
    for version in ("label_extraction@1", "label_extraction@2"):
        key = cache_key("judge-model", msgs, first.client.params(), version)
        assert cache.get(key)["template_version"] == version
    assert len(list((tmp_path / "envcache").rglob("*.json"))) == 12


def test_api_failure_after_retries_is_an_error_result(tmp_path, monkeypatch):
    with LLMServer(answer=echo, faults=FaultSchedule(probabilities={"500": 1.0})) as srv:
        ext = LLMExtractorJudge(**params(srv, tmp_path, max_retries=1))
        mcq = McqLLMJudge(**params(srv, tmp_path, max_retries=1))
        e_out = ext.judge(["piano", "violin"], [None, None])
        m_out = mcq.judge(["A"], [["x", "y"]])
        n = len(srv.requests)
    assert all(r["extracted"] is None and r["error"].startswith("HTTP 500") for r in e_out)
    assert m_out[0]["parsed_index"] is None and m_out[0]["error"].startswith("HTTP 500")
    assert n == 6  # 3 items x (1 + 1 retry)
    assert not list((tmp_path / "cache").rglob("*.json"))  # failures are never cached
    monkeypatch.delenv("EVALCORE_NO_SUCH_KEY", raising=False)
    with LLMServer(answer=echo) as srv:
        out = LLMExtractorJudge(**params(srv, tmp_path, api_key_env="EVALCORE_NO_SUCH_KEY")).judge(["x"], [None])
        assert srv.requests == []
    assert out == [{"extracted": None, "error": "environment variable EVALCORE_NO_SUCH_KEY is not set",
                    "error_class": "input"}]


def test_mcq_llm_parses_letters_and_none(tmp_path):
    opts4 = ["major", "minor", "dorian", "lydian"]
    texts = ["B", "none", "Option D", " c.", "A or B", "C", "I think it is minor", None, "A", "A"]
    options = [opts4, opts4, opts4, opts4, opts4, ["x", "y"], opts4, opts4, None, ["1", "2", "3", "4", "5"]]
    with LLMServer(answer=echo) as srv:
        judge = JUDGES.build("mcq_llm", **params(srv, tmp_path))
        out = judge.judge(texts, options)
        bodies = [json.loads(r.body) for r in srv.requests]
    assert [r["parsed_index"] for r in out] == [1, -1, 3, 2, -1, -1, -1, None, None, None]
    assert [r.get("error") for r in out[7:]] == ["no response", "no options",
                                                 "mcq_llm supports at most 4 options, got 5"]
    assert len(bodies) == 7  # invalid items are not sent
    users = [b["messages"][1]["content"] for b in bodies]  # (concurrent: arrival order varies)
    assert sum("A. x\nB. y\nC. (no such option)\nD. (no such option)" in u for u in users) == 1
    assert all(b["messages"][0]["content"] == MCQ_MATCH.system for b in bodies)
    assert judge.version == "1+mcq_match@1"


def test_judges_pickle_without_key_or_client(tmp_path):
    with LLMServer(answer=echo) as srv:
        judge = McqLLMJudge(**params(srv, tmp_path))
        judge.judge(["A"], [["x", "y"]])  # builds the client (openai client, budget with a lock)
        blob = pickle.dumps(judge)
        copy = pickle.loads(blob)
        assert copy._client is None and copy.judge(["B"], [["x", "y"]]) == [{"parsed_index": 1}]
    assert KEY.encode() not in blob and TEST_API_KEY_ENV.encode() in blob


def test_extractor_inside_ray_workers_with_shared_budget(tmp_path, local_ray):
    ray = local_ray
    from evalcore.llm.budget import RayBudget

    with LLMServer(answer=echo) as srv:
        p = params(srv, tmp_path, budget="test-llm-judges-budget", threads=4)
        budget = RayBudget("test-llm-judges-budget", rpm=p["rpm"], tpm=p["tpm"])

        @ray.remote(num_cpus=0)
        def run(params_json: str, texts: list[str]) -> list[dict]:
            from evalcore.judges.base import JUDGES as judges

            return judges.build("llm_extractor", **json.loads(params_json)).judge(texts, [None] * len(texts))

        try:
            outs = ray.get([run.remote(json.dumps(p), [f"piano, item {w}-{i}" for i in range(5)]) for w in range(2)],
                           timeout=120)
            granted = budget.stats()["granted"]
        finally:
            budget.kill()
        n = len(srv.requests)
    assert n == 10 and granted == 10  # both workers leased from the one shared budget
    assert all(r == {"extracted": ["piano"], "dropped": 1} for out in outs for r in out)
