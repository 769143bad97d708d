"""The transformers backend on tiny random checkpoints built here (no hub): loading, chat templates,
left-padded batched greedy generation equal to unbatched, checkpoint identity, and an actor-pool run."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.core import audio as audio_io
from evalcore.models.base import AudioPrompt
from evalcore.models import tiny
from evalcore.models.audio_chat import answer_view
from evalcore.models.checkpoint import content_sha256

pytestmark = pytest.mark.e2e  # five tiny checkpoints built and loaded for the module (minutes on 2 cores)

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

SR = 16_000
FAMILIES = tiny.FAMILIES
build_tiny = tiny.build_tiny


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("ckpt")
    return {f: build_tiny(f, str(root / f), some_end=True) for f in FAMILIES}


@pytest.fixture(scope="module")
def models(checkpoints):
    from evalcore.models.hf_audio import HFAudioLM

    return {f: HFAudioLM(checkpoint=p, max_new_tokens=8) for f, p in checkpoints.items()}


def _mixed_batch(seed: int = 0) -> list[AudioPrompt]:
    """Different audio lengths and prompt lengths in one batch, plus a text-only input."""
    rng = np.random.default_rng(seed)
    spec = [(1.0, "Describe the music."), (7.5, "What instruments are playing in this music clip? Answer briefly."),
            (3.0, "Hi"), (None, "Describe the music in one sentence."), (0.4, "What instruments?")]
    out = []
    for seconds, prompt in spec:
        x = None if seconds is None else (0.3 * rng.standard_normal(int(seconds * SR))).astype(np.float32)
        out.append(AudioPrompt(x, SR, prompt))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_batched_greedy_equals_unbatched(models, family):
    m = models[family]
    batch = _mixed_batch()
    together = [answer_view(a) for a in m.generate(batch)]
    alone = [answer_view(m.generate([inp])[0]) for inp in batch]
    assert together == alone
    assert len(set(together)) >= 3, together  # the inputs matter, so equality says something
    # answers that end and answers cut at the limit (incomplete error rows in a run) both occur
    assert any(a.startswith("incomplete: ") for a in together), together


def test_negative_control_right_padding_changes_answers(checkpoints):
    """The equality above is not vacuous: the same batch right-padded gives different greedy answers."""
    from evalcore.models.hf_audio import HFAudioLM

    m = HFAudioLM(checkpoint=checkpoints["qwen2_audio"], max_new_tokens=8)
    batch = _mixed_batch()
    alone = [answer_view(m.generate([inp])[0]) for inp in batch]
    m.padding_side = "right"
    assert [answer_view(a) for a in m.generate(batch)] != alone


def test_batch_is_left_padded_with_a_mask(models):
    m = models["qwen2_audio"]
    enc = m.encode([inp for inp in _mixed_batch() if inp.audio is not None])
    ids, mask = enc["input_ids"], enc["attention_mask"]
    assert (mask[:, -1] == 1).all()  # every row ends with its own last token
    assert (mask == 0).any() and (mask[:, 0] == 0).any()  # shorter rows padded on the left
    pad = m.tokenizer.pad_token_id
    assert ((ids == pad) == (mask == 0)).all()


def test_chat_template_is_the_checkpoints(models):
    q = models["qwen2_audio"].encode([AudioPrompt(np.zeros(SR, np.float32), SR, "Describe the music.")])
    text = models["qwen2_audio"].tokenizer.decode(q["input_ids"][0])
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nAudio 1: ")
    assert text.endswith("Describe the music.<|im_end|>\n<|im_start|>assistant\n")
    assert text.count("<|AUDIO|>") == 25  # 1 s of audio → 25 audio positions, expanded by the processor
    af = models["audioflamingo3"]
    t2 = af.tokenizer.decode(af.encode([AudioPrompt(None, SR, "Hi")])["input_ids"][0])
    assert t2 == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    glm = models["glmasr"]
    t3 = glm.tokenizer.decode(glm.encode([AudioPrompt(np.zeros(SR, np.float32), SR, "Hi")])["input_ids"][0])
    assert t3 == ("<|im_start|>user\n<|begin_of_audio|>" + "<|pad|>" * 12  # 1 s → 12 positions (4 frames each)
                  + "<|end_of_audio|>Hi<|im_end|>\n<|im_start|>assistant\n")
    # Voxtral: mistral-common's tokenizer pads 1 s of audio to a 30 s chunk, 375 audio positions after [BEGIN_AUDIO]
    vox = models["voxtral"]
    enc = vox.encode([AudioPrompt(np.zeros(SR, np.float32), SR, "Hi")])
    ids = enc["input_ids"][0].tolist()
    assert ids[:3] == [1, 3, 25] and ids[3:378] == [24] * 375 and ids[378:] == [ord("H") + 32, ord("i") + 32, 4]
    assert tuple(enc["input_features"].shape) == (1, 128, 3000)


def test_audio_spec_from_the_checkpoint_without_loading(checkpoints, models):
    from evalcore.runconfig.config import parse_config
    from evalcore.models.hf_audio import HFAudioLM
    from evalcore.pipeline.resources import audio_spec

    assert HFAudioLM.audio_spec({"checkpoint": checkpoints["qwen2_audio"]}) == (16_000, 30.0)  # Whisper window
    assert HFAudioLM.audio_spec({"checkpoint": checkpoints["audioflamingo3"]}) == (16_000, 60.0)  # max_audio_len
    assert HFAudioLM.audio_spec({"checkpoint": checkpoints["musicflamingo"], "max_audio_seconds": 45}) == (16_000, 45.0)
    assert HFAudioLM.audio_spec({"checkpoint": checkpoints["glmasr"]}) == (16_000, 60.0)  # max_audio_len
    assert HFAudioLM.audio_spec({"checkpoint": checkpoints["voxtral"]}) == (16_000, 30.0)  # one encoder chunk
    for f, m in models.items():  # the loaded model agrees with the driver's cheap read
        assert (m.sample_rate, m.max_audio_seconds) == HFAudioLM.audio_spec({"checkpoint": checkpoints[f]})
    cfg = parse_config({"name": "x", "datasets": [{"name": "d", "kind": "synthetic"}],
                        "models": [{"name": "q", "kind": "hf_audio_lm",
                                    "params": {"checkpoint": checkpoints["qwen2_audio"]}}],
                        "protocols": [{"name": "freeform"}]})
    assert audio_spec(cfg.models[0]) == (16_000, 30.0)


@pytest.mark.parametrize("params, field", [
    ({"checkpoint": "CK", "dtype": "float8"}, "params.dtype"),
    ({"checkpoint": "CK", "family": "gpt2"}, "params.family"),
    ({"checkpoint": "CK", "sample_rate": 44100}, "params.sample_rate"),
    ({"checkpoint": "CK", "max_audio_seconds": 120}, "params.max_audio_seconds"),
    ({"checkpoint": "CK", "temprature": 0.5}, "params.temprature"),
    ({"checkpoint": "CK", "generation": {"max_new_tokens": 3}}, "params.generation.max_new_tokens"),
])
def test_config_mistakes_name_the_field(checkpoints, params, field):
    from evalcore.models.hf_audio import HFAudioLM

    params = {**params, "checkpoint": checkpoints["qwen2_audio"]}
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        HFAudioLM.audio_spec(params)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    from evalcore.models.checkpoint import CheckpointError
    from evalcore.models.hf_audio import HFAudioLM

    with pytest.raises(CheckpointError, match="not a directory"):
        HFAudioLM(checkpoint=str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="sampling_rate"):
        HFAudioLM.audio_spec({"checkpoint": str(tmp_path / "empty")})


def test_info_records_checkpoint_identity_and_generation(checkpoints, models):
    info = models["qwen2_audio"].info()
    assert info["checkpoint"] == {"uri": checkpoints["qwen2_audio"], "sha256": content_sha256(checkpoints["qwen2_audio"]),
                                  "revision": None}
    assert info["generation"] == {"max_new_tokens": 8, "do_sample": False, "num_beams": 1}
    assert info["family"] == "qwen2_audio" and info["dtype"] == "float32" and info["device"] == "cpu"
    json.dumps(info)  # goes into every row's model_info


# ------------------------------------------------------------------------------------ actor pool


def _wav(path: str, seconds: float, freq: float) -> str:
    t = np.arange(int(seconds * 22_050)) / 22_050
    sf.write(path, (0.4 * np.sin(2 * np.pi * freq * t)).astype(np.float32), 22_050)  # resampled to 16 kHz
    return path


@pytest.fixture(scope="module")
def pipeline_run(checkpoints, tmp_path_factory, local_ray):
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.run import run

    tmp = tmp_path_factory.mktemp("hfrun")
    items = [{"item_id": f"c{i}", "protocol": "factual", "task": "instrument", "labels": ["guitar"],
              "question": q, "audio_uri": _wav(str(tmp / f"c{i}.wav"), s, f)}
             for i, (s, f, q) in enumerate([(1.0, 220.0, "What instruments are playing?"),
                                            (4.5, 330.0, "Which instruments can you hear in this clip, if any?"),
                                            (2.0, 440.0, "Instruments?")])]
    items.append({"item_id": "missing", "protocol": "factual", "task": "instrument", "labels": ["guitar"],
                  "question": "What instruments are playing?", "audio_uri": str(tmp / "missing.wav")})
    (tmp / "items.jsonl").write_text("\n".join(json.dumps(r) for r in items))
    cfg = parse_config({
        "name": "hf-tiny",
        "datasets": [{"name": "clips", "kind": "items_file", "params": {"path": str(tmp / "items.jsonl")}}],
        "models": [{"name": f, "kind": "hf_audio_lm", "params": {"checkpoint": checkpoints[f], "max_new_tokens": 8,
                                                                   "device": "cpu"},
                    "resources": {"num_cpus": 0.5, "num_gpus": 0, "concurrency": 1, "batch_size": 8}}
                   for f in FAMILIES],
        "protocols": [{"name": "factual", "conditions": ["correct", "silence", "text_only"],
                       "variants": {"plain": "{question}"}}],
        "storage": {"root": str(tmp / "run")},
        "stats": {"bootstrap_resamples": 100},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
        # random-weight checkpoints: many answers run to the token limit (incomplete error rows) on purpose
        "max_error_rate": None,
    })
    res = run(cfg)
    return cfg, res, pq.read_table(f"{cfg.root}/responses").to_pandas()


def test_actor_pool_runs_every_family_and_records_identity(pipeline_run, checkpoints):
    cfg, res, rows = pipeline_run
    assert res.counts["requests_in"] == res.counts["requests_scored"] + res.counts["requests_errored"]
    for f in FAMILIES:
        mine = rows[rows.model == f]
        assert len(mine) == 4 * 3  # items × conditions, one chunk each
        bad = mine[mine.error_stage == "decode"]
        # the missing clip: a decode error row for correct/silence (not a crash); text_only never reads it
        assert set(bad.item_id) == {"missing"} and len(bad) == 2
        # the other error rows are answers cut at max_new_tokens: class incomplete, of the model stage
        cut = mine[mine.error.notna() & (mine.error_stage != "decode")]
        assert (cut.error_class == "incomplete").all() and (cut.error_stage == "model").all()
        assert cut.error.str.contains("incomplete: the answer was cut at the token limit").all()
        good = mine[mine.error.isna()]
        assert good.text.notna().all()
        ran = mine[mine.error_stage.isna() | (mine.error_stage == "model")]
        infos = {json.loads(i)["checkpoint"]["sha256"] for i in ran.model_info}
        assert infos == {content_sha256(checkpoints[f])}  # every response row carries the checkpoint identity


def test_actor_pool_answers_equal_unbatched_generation(pipeline_run, models):
    """The actors generated in batches of up to 8 mixed rows (audio lengths 1–4.5 s, different prompts, silence,
    text only); each answer equals generating that input alone."""
    _, _, rows = pipeline_run
    checked = 0
    for f in FAMILIES:
        m = models[f]
        for r in rows[(rows.model == f) & (rows.error_stage != "decode")].itertuples():
            if r.condition == "text_only":
                x = None
            else:
                x = audio_io.load(r.audio_uri, m.sample_rate)  # whole clips: no excerpt
                if r.condition == "silence":
                    x = audio_io.silence_like(len(x))
            alone = answer_view(m.generate([AudioPrompt(x, m.sample_rate, r.prompt)])[0])
            if r.error_class == "incomplete":  # cut alone too (its cut text is not stored in the row)
                assert alone.startswith("incomplete: "), (f, r.request_id)
            else:
                assert alone == r.text, (f, r.request_id)
            checked += 1
    assert checked == len(FAMILIES) * 10
    assert 0 < (rows.error_class == "incomplete").sum() < checked  # both kinds of answers were checked


def test_audio_too_short_for_two_positions_is_one_named_error(models):
    """Finding 4: below two audio positions transformers answered with no audio position at all (Audio Flamingo 3,
    GLM-ASR) or failed inside the encoder (Qwen2-Audio, Music Flamingo); now the request is an ``audio_too_short``
    error row of class input at the family's measured minimum, as on vllm_audio_lm (test_models_vllm_audio.py holds
    the two backends equal). Voxtral pads every clip to 30 s: no minimum."""
    from evalcore.models.audio_chat import MIN_AUDIO_SAMPLES, AudioTooShort, IncompleteAnswer

    rng = np.random.default_rng(1)
    for family, m in models.items():
        need = MIN_AUDIO_SAMPLES.get(family)
        lengths = [need // 10, need - 1, need] if need else [160]
        got = m.generate([AudioPrompt((0.3 * rng.standard_normal(n)).astype(np.float32), 16_000, "Describe the music.")
                          for n in lengths])
        if need is None:
            assert all(isinstance(a, (str, IncompleteAnswer)) for a in got), (family, got)
            continue
        assert [isinstance(a, AudioTooShort) for a in got] == [True, True, False], (family, got)
        assert str(got[1]).startswith(f"audio_too_short: {need - 1} samples") and got[1].error_class == "input"
        assert isinstance(got[2], (str, IncompleteAnswer))  # exactly the minimum: answered
