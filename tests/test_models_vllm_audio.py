"""``vllm_audio_lm`` on vLLM's CPU engine, on tiny random checkpoints built here: greedy answers identical to
``hf_audio_lm`` on the same checkpoint and requests, audio that never reached the engine as an error row, and
a run through the Ray Data stream with both backends giving the same tables (and a resume that calls nothing).

vLLM lives in its own venv (``.venv-vllm``, built by ``.ci/run``; or ``EVALCORE_VLLM_PYTHON``). Without it these
tests skip, except under ``CI=true``, where they must run. The config checks need no vLLM.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.models.vllm_audio import vllm_python

sys.path.insert(0, str(Path(__file__).parent))
import vllm_worker  # noqa: E402

pytestmark = pytest.mark.e2e  # four tiny checkpoints built for the module, vLLM engines
FAMILIES = ("qwen2_audio", "audioflamingo3", "glmasr", "voxtral")


def _python() -> str:
    py = vllm_python()
    ok = py is not None and subprocess.run([py, "-c", "import vllm"], capture_output=True, timeout=120).returncode == 0
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no Python with vLLM ({py}); .ci/run builds .venv-vllm")
        pytest.skip("no Python with vLLM: build .venv-vllm (see .ci/run) or set EVALCORE_VLLM_PYTHON")
    return py


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    pytest.importorskip("transformers")
    from evalcore.models.tiny import build_tiny

    root = tmp_path_factory.mktemp("vllm-ckpt")
    # head size 32: vLLM's CPU attention needs at least that
    return {f: build_tiny(f, str(root / f), head_dim=32, some_end=True) for f in FAMILIES}


def _start_engine(py: str, tmp: Path, params: dict, window: float, drop: int | None = None,
                  short: list[int] | None = None) -> subprocess.Popen:
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"params": params, "window": window, "drop": drop, "short": short}))
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    return subprocess.Popen([py, str(Path(vllm_worker.__file__)), str(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _result(proc: subprocess.Popen) -> dict:
    try:
        out, err = proc.communicate(timeout=540)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, err[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def _short(family: str) -> list[int]:
    """Clip lengths (samples at 16 kHz) around the family's measured minimum (a tenth of it, one short, exactly it),
    or, for a family without one (Voxtral pads to 30 s), a 10 ms clip."""
    from evalcore.models.audio_chat import MIN_AUDIO_SAMPLES

    need = MIN_AUDIO_SAMPLES.get(family)
    return [need // 10, need - 1, need] if need else [160]


#: requests whose audio the engine runs of these families drop on the way (request 3 has 3 s of audio): Qwen2-Audio
#: (the engine expands the placeholder) and Voxtral (mistral-common's tokenizer expands it before the engine)
DROP = {"qwen2_audio": 3, "voxtral": 3}


@pytest.fixture(scope="module")
def engine_runs(checkpoints, tmp_path_factory) -> dict[str, subprocess.Popen]:
    """One CPU engine per family, all started at once (each engine thread-bound to one core; their starts,
    mostly imports and warm-up, overlap): family → its worker process, collected by the test that reads it."""
    from evalcore.models.hf_audio import HFAudioLM

    py = _python()
    procs = {}
    for family in FAMILIES:
        window = HFAudioLM.audio_spec({"checkpoint": checkpoints[family]})[1]
        params = {"checkpoint": checkpoints[family], "max_new_tokens": 24, "max_model_len": 2048}
        procs[family] = _start_engine(py, tmp_path_factory.mktemp(f"engine-{family}"), params, window,
                                      DROP.get(family), _short(family))
    yield procs
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.communicate()


# ------------------------------------------------------------------------------------ config, no engine


@pytest.mark.parametrize("params, resources, field", [
    ({"engine_args": {"max_num_seqz": 8}}, {}, "params.engine_args"),
    ({"engine_args": {"model": "x"}}, {}, "params.engine_args"),
    ({"generation": {"do_sample": True}}, {}, "params.generation"),
    ({"generation": {"max_tokens": 3}}, {}, "params.generation"),
    ({"tensor_parallel_size": 4}, {"num_gpus": 2}, "params.tensor_parallel_size"),
    ({"gpu_memory_utilization": 1.5}, {}, "params.gpu_memory_utilization"),
    ({"family": "musicflamingo"}, {}, "params.family"),
    ({"limit_mm_per_prompt": {"audio": 0}}, {}, "params.limit_mm_per_prompt"),
])
def test_config_mistakes_name_the_field(checkpoints, params, resources, field):
    from evalcore.runconfig.config import ConfigError, parse_config

    with pytest.raises((ConfigError, ValueError), match=field.replace(".", r"\.")):
        parse_config({"name": "x", "datasets": [{"name": "d", "kind": "synthetic"}],
                      "models": [{"name": "v", "kind": "vllm_audio_lm", "resources": resources,
                                  "params": {"checkpoint": checkpoints["qwen2_audio"], **params}}],
                      "protocols": [{"name": "freeform"}]})


def test_checkpoint_checks_before_any_engine(checkpoints, tmp_path):
    from evalcore.models.vllm_audio import VLLMAudioLM

    ck = checkpoints["qwen2_audio"]
    assert VLLMAudioLM.audio_spec({"checkpoint": ck}) == (16_000, 30.0)
    with pytest.raises(ValueError, match=r"^max_model_len: 512 tokens cannot hold .* 30 s audio window \(750"):
        VLLMAudioLM.check_files({"checkpoint": ck, "max_model_len": 512})
    with pytest.raises(ValueError, match="^max_model_len: 9000 is longer than the checkpoint's"):
        VLLMAudioLM.check_files({"checkpoint": ck, "max_model_len": 9000})
    VLLMAudioLM.check_files({"checkpoint": ck, "max_model_len": 1024, "max_new_tokens": 32})
    # GLM-ASR: the processor's max_audio_len; Voxtral: one 30 s encoder chunk; both 12.5 audio positions a second
    assert VLLMAudioLM.audio_spec({"checkpoint": checkpoints["glmasr"]}) == (16_000, 60.0)
    assert VLLMAudioLM.audio_spec({"checkpoint": checkpoints["voxtral"]}) == (16_000, 30.0)
    with pytest.raises(ValueError, match=r"^max_model_len: 512 tokens cannot hold .* 60 s audio window \(750 audio"):
        VLLMAudioLM.check_files({"checkpoint": checkpoints["glmasr"], "max_model_len": 512})
    VLLMAudioLM.check_files({"checkpoint": checkpoints["voxtral"], "max_model_len": 512, "max_new_tokens": 32})
    from evalcore.models.tiny import build_tiny

    mf = build_tiny("musicflamingo", str(tmp_path / "mf"))  # served by hf_audio_lm only (vLLM dropped it)
    with pytest.raises(ValueError, match="^checkpoint: checkpoint model_type 'musicflamingo' is not a family"):
        VLLMAudioLM.check_files({"checkpoint": mf})


def test_the_actors_get_the_vllm_interpreter(checkpoints, monkeypatch, tmp_path):
    from evalcore.models.vllm_audio import VLLMAudioLM

    fake = tmp_path / "bin" / "python"
    monkeypatch.setenv("EVALCORE_VLLM_PYTHON", str(fake))
    env = VLLMAudioLM.runtime_env({"checkpoint": checkpoints["qwen2_audio"], "cpu_kv_cache_gb": 2})
    assert env["py_executable"] == str(fake)
    assert env["env_vars"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["env_vars"]["VLLM_CPU_KVCACHE_SPACE"] == "2"


# ------------------------------------------------------------------------------------ the CPU engine


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_answers_equal_hf_audio_lm(checkpoints, engine_runs, family):
    """The same checkpoint and 24 mixed requests (0.4–12 s of audio, none, prompts of 1–12 words): the vLLM
    engine's greedy answers equal transformers' — finished answers word for word, and the same ones cut at the
    token limit. For Qwen2-Audio (the engine expands the audio placeholder) and Voxtral (mistral-common's tokenizer
    expands it before the engine) the engine also runs a batch in which one request's audio is dropped on its way
    to the engine: that row is an error row of class model, every other row is answered as before."""
    from evalcore.models.audio_chat import answer_view
    from evalcore.models.hf_audio import HFAudioLM

    drop = DROP.get(family)
    got = _result(engine_runs[family])
    hf = HFAudioLM(checkpoint=checkpoints[family], max_new_tokens=24)
    want = [answer_view(a) for a in hf.generate(vllm_worker.requests())]
    assert got["answers"] == want
    finished = [a for a in want if not a.startswith("incomplete: ")]
    assert finished and len(finished) < len(want) and len(set(want)) >= 8  # both kinds, and inputs matter
    assert got["unknown_engine_args"] == [] and got["unknown_sampling"] == []  # the allowlists match vLLM's fields
    # audio too short for two audio positions: one named error on both backends (finding 4), never a mislabel
    short = [answer_view(a) for a in hf.generate(vllm_worker.short_requests(_short(family)))]
    assert got["short"] == short
    if family in ("qwen2_audio", "audioflamingo3", "glmasr"):
        assert [a.startswith("input: audio_too_short: ") for a in short] == [True, True, False], short
    assert not any("audio_not_received" in a for a in short)
    info = got["info"]
    assert info["vllm"] and info["checkpoint"]["sha256"] == hf.info()["checkpoint"]["sha256"]
    if drop is not None:
        rows = got["dropped"]
        lost = rows[drop]
        assert lost["error_class"] == "model" and lost["error_stage"] == "model" and lost["text"] is None
        assert "audio_not_received" in lost["error"]
        for i, r in enumerate(rows):
            if i != drop:
                assert (r["text"] if r["error"] is None else f"incomplete: {r['error_class']}") == (
                    want[i] if not want[i].startswith("incomplete: ") else "incomplete: incomplete"), i


def _wav(path: Path, seconds: float, freq: float) -> str:
    t = np.arange(int(seconds * 22_050)) / 22_050
    sf.write(str(path), (0.4 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 22_050)  # resampled to 16 kHz
    return str(path)


@pytest.mark.slow
def test_run_through_the_stream_gives_hf_audio_lms_tables(checkpoints, tmp_path, local_ray):
    """One run, two models on the same checkpoint: ``hf_audio_lm`` and ``vllm_audio_lm`` (its actor in the vLLM
    interpreter). Every request gets the same answer or error from both, the summary tables agree cell for cell,
    counts reconcile, and ``--resume`` runs nothing again."""
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.run import run

    _python()
    items = [{"item_id": f"c{i}", "protocol": "factual", "task": "instrument", "labels": ["guitar"],
              "question": q, "audio_uri": _wav(tmp_path / f"c{i}.wav", s, f)}
             for i, (s, f, q) in enumerate([(1.0, 220.0, "What instruments are playing?"),
                                            (4.5, 330.0, "Which instruments can you hear in this clip, if any?"),
                                            (2.0, 440.0, "Instruments?"), (3.0, 550.0, "Describe the music.")])]
    items.append({"item_id": "missing", "protocol": "factual", "task": "instrument", "labels": ["guitar"],
                  "question": "What instruments are playing?", "audio_uri": str(tmp_path / "missing.wav")})
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(r) for r in items))
    params = {"checkpoint": checkpoints["qwen2_audio"], "max_new_tokens": 24}
    cfg = parse_config({
        "name": "engines",
        "datasets": [{"name": "clips", "kind": "items_file", "params": {"path": str(tmp_path / "items.jsonl")}}],
        "models": [{"name": "hf", "kind": "hf_audio_lm", "params": {**params, "device": "cpu"},
                    "resources": {"num_cpus": 0.25, "batch_size": 8}},
                   {"name": "vllm", "kind": "vllm_audio_lm", "params": {**params, "max_model_len": 2048},
                    "resources": {"num_cpus": 0.25, "batch_size": 8}}],
        "protocols": [{"name": "factual", "conditions": ["correct", "random", "silence", "text_only"],
                       "variants": {"plain": "{question}"}}],
        "storage": {"root": str(tmp_path / "run")},
        "stats": {"bootstrap_resamples": 100},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.25},
        # random-weight checkpoints: many answers run to the token limit (incomplete error rows) on purpose
        "max_error_rate": None,
    })
    res = run(cfg)
    c = res.counts
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"] == 2 * 5 * 4
    rows = pq.read_table(f"{cfg.root}/responses").to_pandas()
    key = ["item_id", "condition", "variant", "chunk_index"]
    cols = ["text", "error_class", "error_stage"]
    hf = rows[rows.model == "hf"].set_index(key).sort_index()[cols]
    vl = rows[rows.model == "vllm"].set_index(key).sort_index()[cols]
    pd.testing.assert_frame_equal(hf, vl)
    assert hf.text.notna().sum() >= 4 and (hf.error_class == "incomplete").sum() >= 4  # both kinds in the tables
    assert "missing" in set(rows[rows.error_stage == "decode"].item_id)  # (a random draw of its clip fails too)
    info = {m: json.loads(rows[(rows.model == m) & (rows.error_stage != "decode")].model_info.iloc[0]) for m in ("hf", "vllm")}
    assert info["vllm"]["backend"] == "VLLMAudioLM" and info["vllm"]["vllm"]
    assert info["vllm"]["checkpoint"] == info["hf"]["checkpoint"]
    summary = pd.read_parquet(f"{cfg.root}/tables/summary.parquet")
    num = summary.select_dtypes("number").columns
    per = {m: summary[summary.model == m].drop(columns=["model"]).reset_index(drop=True) for m in ("hf", "vllm")}
    pd.testing.assert_frame_equal(per["hf"][num], per["vllm"][num])

    shards = sorted(p.name for p in (Path(cfg.root) / "responses").rglob("*.parquet"))
    again = run(cfg, resume=True)
    assert sorted(p.name for p in (Path(cfg.root) / "responses").rglob("*.parquet")) == shards  # nothing re-ran
    assert again.counts["requests_in"] == c["requests_in"] and again.counts["requests_scored"] == c["requests_scored"]


def test_validate_catches_what_the_engine_would_refuse(checkpoints, tmp_path):
    """Finding 4, before any engine starts: a decoder head size vLLM's CPU attention cannot run on a model that asks
    no GPU, and a ``max_model_len`` that holds the audio window and the answer but not the run's longest prompt
    (it used to pass, then every row failed), each one line naming the field."""
    from evalcore.runconfig import preflight
    from evalcore.runconfig.config import parse_config
    from evalcore.models.tiny import build_tiny

    narrow = build_tiny("qwen2_audio", str(tmp_path / "narrow"))  # head size 8
    long_q = "Listen closely and tell me, " + "in as much detail as you can manage, " * 40 + "which instruments play?"
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(
        {"item_id": f"i{k}", "protocol": "factual", "task": "instrument", "labels": ["guitar"], "question": q,
         "audio_uri": str(tmp_path / "a.wav")}) for k, q in enumerate(["Instruments?", long_q])))

    def cfg(checkpoint: str, num_gpus: float, max_model_len: int | None) -> object:
        params = {"checkpoint": checkpoint, "max_new_tokens": 32,
                  **({"max_model_len": max_model_len} if max_model_len else {})}
        return parse_config({"name": "v", "storage": {"root": str(tmp_path / "run")},
                             "datasets": [{"name": "d", "kind": "items_file",
                                           "params": {"path": str(tmp_path / "items.jsonl")}}],
                             "models": [{"name": "v", "kind": "vllm_audio_lm", "params": params,
                                         "resources": {"num_gpus": num_gpus}}],
                             "protocols": [{"name": "factual", "conditions": ["correct"]}]})

    (line,) = preflight.placement_problems(cfg(narrow, 0, None))
    assert line.startswith("models.0.params.checkpoint: model 'v': decoder head size 8 is not one vLLM's CPU "
                           "attention runs (32, 64,") and "resources.num_gpus" in line
    assert preflight.placement_problems(cfg(narrow, 1, None)) == []  # on a GPU
    assert preflight.placement_problems(cfg(checkpoints["qwen2_audio"], 0, None)) == []  # head size 32

    from evalcore.models.vllm_audio import VLLMAudioLM

    ck = checkpoints["qwen2_audio"]
    VLLMAudioLM.check_files({"checkpoint": ck, "max_model_len": 820, "max_new_tokens": 32})  # window + answer fit
    (line,) = preflight.prompt_problems(cfg(ck, 0, 820))
    assert line.startswith("models.0.params.max_model_len: model 'v': 820 tokens cannot hold the run's longest "
                           "prompt: ") and "Listen closely" in line and "750 audio positions" in line
    assert preflight.prompt_problems(cfg(ck, 0, 4096)) == []
    assert preflight.prompt_problems(cfg(ck, 0, None)) == []  # the checkpoint's own length: nothing set to check
