"""The OpenAI-compatible audio chat backend against the local server of tests/llm_server.py on 127.0.0.1:
base64 WAV ``input_audio`` parts, the LLM layer's cache and budget, row errors, the key never written."""

from __future__ import annotations

import base64
import io
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
from llm_server import TEST_API_KEY_ENV, Fault, FaultSchedule, LLMServer, install_test_key

from evalcore.models.base import AudioPrompt
from evalcore.models.openai_audio import OpenAIAudioChat

KEY = install_test_key()  # at import, before any Ray worker starts, so workers inherit it
SR = 16_000


def audio_answer(messages: list[dict]) -> str:
    """What an audio LM server would do: decode the WAV part; answer with its length, level and the prompt."""
    user = messages[-1]
    assert user["role"] == "user" and isinstance(user["content"], list)
    parts = {p["type"]: p for p in user["content"]}
    text = parts["text"]["text"]
    if "input_audio" not in parts:
        return f"no audio | {text}"
    ia = parts["input_audio"]["input_audio"]
    assert ia["format"] == "wav"
    x, sr = sf.read(io.BytesIO(base64.b64decode(ia["data"])), dtype="float32")
    assert x.ndim == 1
    return f"{len(x) / sr:.2f} s at {sr} Hz, peak {np.abs(x).max():.2f} | {text}"


def _model(srv: LLMServer, tmp_path, **kw) -> OpenAIAudioChat:
    return OpenAIAudioChat(base_url=srv.base_url, model="qwen2-audio-test", rpm=600, tpm=1_000_000,
                           api_key_env=TEST_API_KEY_ENV, cache_root=str(tmp_path / "cache"),
                           log_root=str(tmp_path / "log"), **kw)


def _tone(seconds: float, peak: float) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (peak * np.sin(2 * np.pi * 440 * t)).astype(np.float32)


def test_audio_goes_as_base64_wav_input_audio(tmp_path):
    with LLMServer(answer=audio_answer) as srv:
        m = _model(srv, tmp_path, system_prompt="You are a music expert.")
        out = m.generate([AudioPrompt(_tone(1.5, 0.5), SR, "Describe it."), AudioPrompt(None, SR, "Hi"),
                          AudioPrompt(_tone(0.25, 0.8), SR, "Tempo?")])
        assert out == ["1.50 s at 16000 Hz, peak 0.50 | Describe it.", "no audio | Hi",
                       "0.25 s at 16000 Hz, peak 0.80 | Tempo?"]
        bodies = [json.loads(r.body) for r in srv.requests]
        assert len(bodies) == 3 and {b["model"] for b in bodies} == {"qwen2-audio-test"}
        first = next(b for b in bodies if b["messages"][1]["content"][-1]["text"] == "Describe it.")
        assert first["messages"][0] == {"role": "system", "content": "You are a music expert."}
        assert [p["type"] for p in first["messages"][1]["content"]] == ["input_audio", "text"]
        assert first["temperature"] == 0.0 and first["max_tokens"] == 256  # greedy by default, recorded
        assert all("authorization" not in {k.lower() for k in r.headers} for r in srv.requests)
        assert {r.auth_sha256 for r in srv.requests} != {None}  # the key went only as the auth header


def test_responses_are_cached(tmp_path):
    batch = [AudioPrompt(_tone(0.5, 0.3), SR, "Describe it."), AudioPrompt(None, SR, "Hi")]
    with LLMServer(answer=audio_answer) as srv:
        first = _model(srv, tmp_path).generate(batch)
        assert len(srv.requests) == 2
        assert _model(srv, tmp_path).generate(batch) == first  # a new actor, same cache root
        assert len(srv.requests) == 2  # no new call


def test_token_budget_counts_audio_seconds_not_base64_characters(tmp_path):
    with LLMServer(answer=audio_answer) as srv:
        m = _model(srv, tmp_path, max_tokens=64)
        inp = AudioPrompt(_tone(30.0, 0.5), SR, "Describe it.")
        est = m.estimate_tokens(inp)
        assert est == 30 * 25 + 4 + 16 + 64  # 25 tokens a second of audio + text + answer budget
        assert len(json.dumps(m.messages(inp))) > 1000 * est  # what a characters-based estimate would count


def test_failed_request_is_that_rows_error(tmp_path):
    """Through the real model stage: the request that fails (HTTP 500, no retries) errors its row only."""
    from evalcore.pipeline.stages import AUDIO_FIELD, DECODED, ModelRunner

    with LLMServer(answer=audio_answer, faults=FaultSchedule(by_index={0: Fault("500")})) as srv:
        params = {"base_url": srv.base_url, "model": "m", "api_key_env": TEST_API_KEY_ENV, "max_retries": 0, "rpm": 6000,
                  "tpm": 10_000_000,  # the test server counts base64 characters as tokens
                  "threads": 1, "cache_root": str(tmp_path / "cache")}
        runner = ModelRunner("openai_audio_chat", params, (SR, 30.0))
        rows = [{"request_id": f"r{i}", "dataset": "d", "item_id": f"i{i}", "protocol": "freeform", "model": "m",
                 "condition": "correct", "variant": "v", "option_order": 0, "prompt": f"question {i}",
                 "audio": _tone(0.5 + i, 0.5).tolist()} for i in range(3)]
        out = runner(pa.Table.from_pylist(rows, schema=DECODED)).to_pylist()
    assert AUDIO_FIELD.name not in out[0]
    errors = [r for r in out if r["error"] is not None]
    assert len(errors) == 1 and errors[0]["error_stage"] == "model" and "HTTP 500" in errors[0]["error"]
    assert [r["text"] for r in out if r["error"] is None] == [
        f"{0.5 + i:.2f} s at 16000 Hz, peak 0.50 | question {i}" for i in range(3) if f"r{i}" != errors[0]["request_id"]]


def test_bad_api_key_env_param_fails_fast():
    with pytest.raises(ValueError, match="api_key_env"):
        OpenAIAudioChat(base_url="http://127.0.0.1:1/v1", model="m", api_key_env="sk-abc123-not-a-name")


def test_actor_pool_run_with_shared_budget(tmp_path, local_ray):
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.run import run

    wav = tmp_path / "clip.wav"
    sf.write(str(wav), _tone(2.0, 0.5), SR)
    items = [{"item_id": "a", "protocol": "freeform", "question": "Describe the music.", "reference": "a tone",
              "audio_uri": str(wav)}]
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(r) for r in items))
    with LLMServer(answer=audio_answer) as srv:
        cfg = parse_config({
            "name": "endpoint",
            "datasets": [{"name": "d", "kind": "items_file", "params": {"path": str(tmp_path / "items.jsonl")}}],
            "models": [{"name": "remote", "kind": "openai_audio_chat",
                        "params": {"base_url": srv.base_url, "model": "qwen2-audio-test", "rpm": 600,
                                   "tpm": 1_000_000, "api_key_env": TEST_API_KEY_ENV, "budget": "test-audio-endpoint",
                                   "cache_root": str(tmp_path / "cache")},
                        "resources": {"num_cpus": 0.5, "concurrency": 1, "batch_size": 4}}],
            "protocols": [{"name": "freeform", "conditions": ["correct", "silence", "text_only"]}],
            "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 100},
            "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
        })
        run(cfg)
        n_calls = len(srv.requests)
    rows = pq.read_table(f"{cfg.root}/responses").to_pandas().set_index("condition")
    assert rows.error.isna().all()
    assert rows.loc["correct", "text"] == "2.00 s at 16000 Hz, peak 0.50 | Describe the music."
    assert rows.loc["silence", "text"] == "2.00 s at 16000 Hz, peak 0.00 | Describe the music."
    assert rows.loc["text_only", "text"] == "no audio | Describe the music."
    assert n_calls == 3
    info = json.loads(rows.loc["correct", "model_info"])
    assert info["served_model"] == "qwen2-audio-test" and info["generation"]["temperature"] == 0.0
    # the key is in no output: not in the responses, the config copy, the cache
    for dirpath, _, files in os.walk(tmp_path):
        for f in files:
            assert KEY.encode() not in open(os.path.join(dirpath, f), "rb").read(), f
