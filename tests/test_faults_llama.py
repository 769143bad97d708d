"""Fault injection against a server evalcore did not write: llama.cpp's OpenAI-compatible server
(``llama-cpp-python[server]``, tests/llama_server.py) with a tiny GGUF the test writes.

The server's package compiles llama.cpp, so it lives in its own venv (``.ci/run`` builds it; see
docs/testing.md). Where it is absent these tests skip with that reason — except in CI (``CI=true``), where a
missing server is a failure: CI always runs them.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.core.errors import MAX_REASON_CHARS
from evalcore.judges.llm_judges import McqLLMJudge
from evalcore.llm.cache import ResponseCache
from evalcore.llm.client import EndpointConfig, LLMClient
from evalcore.models.base import AudioPrompt
from evalcore.models.openai_audio import OpenAIAudioChat
from llama_server import LlamaServer, llama_python, write_tiny_gguf
from llm_server import TEST_API_KEY_ENV, install_test_key, llama_refusal

install_test_key()
PYTHON = llama_python()
if PYTHON is None and os.environ.get("CI", "").lower() != "true":
    pytest.skip("llama.cpp server not installed here (.ci/run builds it into .venv-llama; or set "
                "EVALCORE_LLAMA_PYTHON)", allow_module_level=True)
DOWN_S = float(os.environ.get("EVALCORE_FAULT_DOWN_S", "4"))
ENDPOINT = dict(model="tiny", api_key_env=TEST_API_KEY_ENV, rpm=100_000, tpm=100_000_000, timeout_s=30.0,
                backoff_base_s=0.05, backoff_max_s=0.1)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    assert PYTHON is not None, "CI must run the llama.cpp fault tests: .ci/run builds .venv-llama"
    d = tmp_path_factory.mktemp("llama")
    with LlamaServer(PYTHON, write_tiny_gguf(d / "tiny.gguf"), d / "server.log") as srv:
        yield srv


def _post(srv: LlamaServer, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(f"{srv.base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _without_trace(body: dict) -> str:
    return body["error"]["message"].split("\n\n  File ")[0]


def test_the_scripted_server_refuses_as_llama_does(llama) -> None:
    """tests/llm_server.py's llama.cpp refusals are the real server's, byte for byte up to its file path."""
    audio = [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "UklGR" * 20,
                                                                                 "format": "wav"}},
                                          {"type": "text", "text": "hi"}]}]
    schema = {"type": "json_schema", "json_schema": {"name": "X", "schema": {"type": "object"}, "strict": True}}
    for body in ({"model": "tiny", "messages": audio, "max_tokens": 4},
                 {"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 4,
                  "response_format": schema}):
        status, real = _post(llama, body)
        mine = json.loads(llama_refusal(body))
        assert status == 500 and _without_trace(real) == _without_trace(mine)
        assert {k: v for k, v in real["error"].items() if k != "message"} == \
               {k: v for k, v in mine["error"].items() if k != "message"}


def test_structured_output_steps_down_and_scores_on_llama(llama, tmp_path) -> None:
    before = llama.completions()
    judge = McqLLMJudge(output="json", base_url=llama.base_url, cache_root=str(tmp_path), threads=1, max_retries=5,
                        max_tokens=16, **ENDPOINT)
    out = judge.judge(["I would say the first one", "the first", "first"], [["piano", "drums"]] * 3)
    after = llama.completions()
    assert [r.get("parsed_index") for r in out] == [0, 0, 0], out
    assert after.get(500, 0) - before.get(500, 0) == 1  # json_schema refused once, then json_object
    assert after.get(200, 0) - before.get(200, 0) == 3


def test_a_truncated_answer_on_llama_is_incomplete_and_not_cached(llama, tmp_path) -> None:
    judge = McqLLMJudge(base_url=llama.base_url, cache_root=str(tmp_path), max_tokens=4, **ENDPOINT)
    before = llama.completions().get(200, 0)
    for _ in range(2):
        (r,) = judge.judge(["A guitar"], [["guitar", "piano"]])
        assert r["parsed_index"] is None and r["error_class"] == "incomplete"
        assert "finish_reason 'length'" in r["error"]
    assert llama.completions().get(200, 0) - before == 2 and not list(tmp_path.rglob("*.json"))


def test_audio_refused_on_llama_is_input_and_tried_twice_at_most(llama, tmp_path) -> None:
    before = llama.completions().get(500, 0)
    model = OpenAIAudioChat(base_url=llama.base_url, model="tiny", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                            tpm=100_000_000, max_retries=5, cache_root=str(tmp_path), threads=3)
    x = np.random.default_rng(0).uniform(-0.5, 0.5, 32_000).astype(np.float32)
    out = model.generate([AudioPrompt(x, 16_000, f"q{i}") for i in range(3)])
    assert all(o.error_class == "input" and len(str(o)) <= MAX_REASON_CHARS and "\n" not in str(o) for o in out)
    assert "validation errors" in str(out[0]) and "chars elided" in str(out[0])
    assert llama.completions().get(500, 0) - before == 6


def test_identical_requests_in_flight_on_llama_make_one_call_each(llama, tmp_path) -> None:
    client = LLMClient(EndpointConfig(base_url=llama.base_url, max_tokens=64, **ENDPOINT),
                       cache=ResponseCache(str(tmp_path)))
    before = sum(llama.completions().values())
    msgs = [[{"role": "user", "content": f"request {i % 8}"}] for i in range(40)]
    with ThreadPoolExecutor(16) as pool:
        out = list(pool.map(lambda m: client.complete(m, response_format={"type": "json_object"}), msgs))
    assert all(o.text == '{"choice":"A"}' for o in out)
    assert sum(llama.completions().values()) - before == 8  # counted by the server itself


@pytest.mark.ray
def test_llama_killed_mid_run_then_resume_scores_everything(llama, tmp_path, local_ray) -> None:
    cfg = {"name": "llama-faults",
           "datasets": [{"name": "synth", "kind": "synthetic",
                         "params": {"n_clips": 4, "seconds": 2.0, "seed": 1, "bad_clips": 0}}],
           "models": [{"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 16}}],
           "protocols": [{"name": "mcq", "conditions": ["correct", "text_only"], "option_orders": 2,
                          "templates": "muchomusic",
                          "judge": {"kind": "mcq_llm", "params": {"base_url": llama.base_url, "output": "json",
                                                                  "max_retries": 1, "max_tokens": 16, "threads": 4,
                                                                  **ENDPOINT}}}],
           "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 100},
           "ray": {"progress_bars": False, "decode_num_cpus": 0.5}, "max_error_rate": 0.05}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    start = sum(llama.completions().values())

    def outage() -> None:  # SIGKILL after a few answers; the same port answers again DOWN_S later
        deadline = time.monotonic() + 120
        while sum(llama.completions().values()) - start < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        llama.kill()
        time.sleep(DOWN_S)
        llama.start()

    t = threading.Thread(target=outage)
    t.start()
    first = CliRunner().invoke(app, ["run", str(tmp_path / "cfg.yaml")])
    t.join()
    mid = llama.completions()
    errors = pq.read_table(tmp_path / "run" / "tables" / "errors.parquet").to_pandas()
    second = CliRunner().invoke(app, ["run", "--resume", str(tmp_path / "run")])
    end = llama.completions()
    assert first.exit_code == 4 and "error budget exceeded" in first.stderr, first.output
    assert len(errors) and set(errors["error_class"]) == {"transient"}
    assert second.exit_code == 0, second.output
    c = json.loads((tmp_path / "run" / "run.json").read_text())["counts"]
    assert c["requests_in"] == c["requests_scored"] == 48
    calls = end.get(200, 0) - mid.get(200, 0)
    assert 0 < calls <= len(errors)  # only failed work is asked again (identical failed requests once)
    print(f"\nllama.cpp killed for {DOWN_S:.0f} s: {len(errors)} transient error rows; --resume made {calls} "
          f"server calls (server log); all {c['requests_in']} requests scored")
