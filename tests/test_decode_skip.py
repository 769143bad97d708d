"""Models that ignore audio (``MusicLM.uses_audio = False``) get no audio read by the decode stage."""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.runconfig.config import ModelConfig, parse_config
from evalcore.models.base import MusicLM
from evalcore.models.dsp_listener import DSPListener
from evalcore.models.reference_rewrite import ReferenceRewrite
from evalcore.pipeline.resources import uses_audio
from evalcore.pipeline.run import run
from evalcore.pipeline.stages import Decoder
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

KEY = install_test_key()  # before Ray starts, so the model actors inherit it
GOOD, MISSING, CORRUPT = ("g0", "g1", "g2"), ("m0", "m1"), ("c0",)


def _wav(freq: float) -> bytes:
    t = np.arange(8000) / 16_000
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 16_000, format="WAV")
    return buf.getvalue()


def _row(uri: str, condition: str) -> dict:
    return {"audio_uri": uri, "excerpt_start": None, "excerpt_end": None, "condition": condition, "error": None,
            "seed": 0}


def test_uses_audio_is_read_from_the_class_without_building_the_model(tmp_path):
    assert MusicLM.uses_audio and DSPListener.uses_audio and not ReferenceRewrite.uses_audio
    rewrite = {"mode": "paraphrase", "base_url": "http://127.0.0.1:9/v1", "model": "m", "rpm": 60, "tpm": 6000}
    assert not uses_audio(ModelConfig(name="p", kind="reference_rewrite", params=rewrite))
    assert uses_audio(ModelConfig(name="l", kind="dsp_listener"))
    (tmp_path / "bad.wav").write_bytes(b"RIFF not really a wav")
    for uri in (str(tmp_path / "absent.wav"), str(tmp_path / "bad.wav")):
        for cond in ("correct", "random", "silence", "noise", "text_only"):
            [row] = Decoder(16_000, 10.0, uses_audio=False).one(_row(uri, cond), {})
            assert row["error"] is None and row["audio"] is None and row["audio_seconds"] == 0.0
            assert (row["chunk_index"], row["n_chunks"]) == (0, 1)
        [row] = Decoder(16_000, 10.0).one(_row(uri, "correct"), {})  # an audio model: an error row
        assert row["error_stage"] == "decode" and row["error"]


def paraphrase(messages: list[dict]) -> str:
    return "In other words: " + messages[-1]["content"].split('"""\n', 1)[1].rsplit('\n"""', 1)[0]


@pytest.mark.ray
def test_rewrite_system_scores_items_whose_audio_is_missing_while_an_audio_model_errors(tmp_path, local_ray):
    audio = tmp_path / "audio"
    audio.mkdir()
    lines = []
    for i, q in enumerate(GOOD + MISSING + CORRUPT):
        if q in GOOD:
            (audio / f"{q}.wav").write_bytes(_wav(220.0 * (i + 1)))
        elif q in CORRUPT:
            (audio / f"{q}.wav").write_bytes(b"RIFF\x00\x00 truncated")
        lines.append(json.dumps({"item_id": q, "protocol": "freeform", "task": "caption", "audio_uri": f"{q}.wav",
                                 "question": "Describe the music.", "reference": f"A song number {i}."}))
    (tmp_path / "items.jsonl").write_text("\n".join(lines) + "\n")
    res = {"num_cpus": 0.25, "concurrency": 1, "batch_size": 4}
    with LLMServer(answer=paraphrase) as srv:
        llm = dict(base_url=srv.base_url, model="rewrite-model", api_key_env=TEST_API_KEY_ENV, rpm=100_000,
                   tpm=10_000_000, timeout_s=5.0, max_retries=1, cache_root=str(tmp_path / "llm-cache"), threads=2)
        cfg = {
            "name": "decode-skip",
            "datasets": [{"name": "qa", "kind": "items_file",
                          "params": {"path": str(tmp_path / "items.jsonl"), "audio_root": str(audio)}}],
            "models": [{"name": "paraphrase", "kind": "reference_rewrite", "params": {**llm, "mode": "paraphrase"},
                        "resources": res},
                       {"name": "listener", "kind": "dsp_listener", "params": {}, "resources": res}],
            "protocols": [{"name": "freeform", "conditions": ["correct", "noise"]}],
            "storage": {"root": str(tmp_path / "run")},
            "stats": {"bootstrap_resamples": 100},
            "ray": {"progress_bars": False, "decode_num_cpus": 0.25},
        }
        result = run(parse_config(cfg))
    c = result.counts
    assert c["requests_in"] == 2 * 2 * 6 == c["requests_scored"] + c["requests_errored"]  # nothing lost
    errors = pq.read_table(tmp_path / "run" / "tables" / "errors.parquet").to_pandas()
    bad = set(MISSING + CORRUPT)
    assert {(r.model, r.item_id, r.condition) for r in errors.itertuples()} == {
        ("listener", q, cond) for q in bad for cond in ("correct", "noise")}
    assert set(errors["error_stage"]) == {"decode"}
    responses = pq.read_table(tmp_path / "run" / "responses").to_pandas()
    para = responses[responses["model"] == "paraphrase"]
    assert len(para) == 12 and para["error"].isna().all()  # every item scored, missing audio or not
    assert (para["audio_seconds"] == 0.0).all() and (para["n_chunks"] == 1).all()
    assert set(para[para["item_id"] == "m0"]["text"]) == {"In other words: A song number 3."}
    listener_ok = responses[(responses["model"] == "listener") & responses["error"].isna()]
    assert set(listener_ok["item_id"]) == set(GOOD) and (listener_ok["audio_seconds"] > 0).all()
