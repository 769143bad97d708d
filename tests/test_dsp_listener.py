"""Tests for the DSP listener, the text-only prior and the null model."""

from __future__ import annotations

import numpy as np
import pytest
import soxr

from evalcore.datasets.synthetic import ClipSpec, clip_items, is_tonal, make_specs, synthesize_clip
from evalcore.models import AudioPrompt
from evalcore.models.dsp_listener import Analysis, DSPListener, analyze, answer, parse_options
from evalcore.models.null import NullModel
from evalcore.models.text_prior import TextPrior
from evalcore.kinds.base import KINDS
from evalcore.protocols.prompts import render
from evalcore.models.base import MODELS

SR = 22050


def f1(pred: set[str], true: set[str]) -> float:
    return 2 * len(pred & true) / (len(pred) + len(true)) if pred or true else 1.0


def accuracy(seed: int, resample_to: int | None = None) -> dict[str, float]:
    """Analysis accuracy over the 48 demo clips of ``seed``."""
    inst, mode, tempo, tempo_oct = [], [], [], []
    for spec in make_specs(48, 8.0, seed):
        x, sr = synthesize_clip(spec, SR), SR
        if resample_to:
            x, sr = soxr.resample(x, SR, resample_to), resample_to
        a = analyze(x, sr)
        inst.append(f1(set(a.instruments), set(spec.instruments)))
        mode.append(a.mode == (spec.mode if is_tonal(spec) else None))
        ratio = (a.tempo_bpm or 0.0) / spec.tempo_bpm
        tempo.append(abs(ratio - 1) <= 0.08)
        tempo_oct.append(any(abs(ratio / m - 1) <= 0.08 for m in (0.5, 1.0, 2.0)))
    return {
        "instrument_f1": float(np.mean(inst)),
        "mode": float(np.mean(mode)),
        "tempo": float(np.mean(tempo)),
        "tempo_octave": float(np.mean(tempo_oct)),
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_analysis_accuracy_on_demo_clips(seed: int):
    acc = accuracy(seed)
    print(f"seed {seed}: {acc}")
    assert acc["instrument_f1"] >= 0.85, acc
    assert acc["mode"] >= 0.8, acc
    assert acc["tempo"] >= 0.7, acc
    assert acc["tempo_octave"] >= 0.9, acc


def test_analysis_accuracy_after_resampling_to_16k():
    acc = accuracy(0, resample_to=16000)
    print(f"seed 0 @16 kHz: {acc}")
    assert acc["instrument_f1"] >= 0.85 and acc["mode"] >= 0.8 and acc["tempo"] >= 0.7, acc


def test_silence_and_noise_have_no_instruments():
    silence = analyze(np.zeros(8 * 16000, np.float32), 16000)
    assert silence.instruments == () and silence.tempo_bpm is None and silence.mode is None
    rng = np.random.default_rng(0)
    for amp in (0.01, 0.3):
        noise = analyze((amp * rng.standard_normal(8 * 16000)).astype(np.float32), 16000)
        assert noise.instruments == (), noise.scores
    assert analyze(np.zeros(0, np.float32), 16000).instruments == ()


def test_single_instruments_are_recognised():
    for name in ("guitar", "drums", "bass", "organ", "flute"):
        spec = ClipSpec("x", 100.0, "D", "minor", (name,), 6.0, 11)
        assert analyze(synthesize_clip(spec, SR), SR).instruments == (name,)


def test_tempo_and_mode_of_a_known_clip():
    spec = ClipSpec("x", 128.0, "A", "minor", ("guitar", "drums", "bass"), 8.0, 5)
    a = analyze(synthesize_clip(spec, SR), SR)
    assert a.tempo_bpm == pytest.approx(128.0, rel=0.03)
    assert a.mode == "minor"
    assert -30.0 < a.loudness < 0.0


def prompts_for(spec: ClipSpec) -> tuple[dict[str, str], dict[str, int | None]]:
    """Rendered prompts and correct option indices of the clip's items, by task."""
    items = clip_items(spec, "u", {})
    prompts = {
        r["task"]: render(KINDS.get(r["protocol"]).variants["default"], r["question"], r.get("options"))
        for r in items
    }
    return prompts, {r["task"]: r.get("correct_option") for r in items}


def test_listener_answers_from_the_audio():
    spec = ClipSpec("x", 150.0, "E", "major", ("organ", "flute"), 8.0, 3)
    p, correct = prompts_for(spec)
    model = DSPListener()
    tasks = ["caption", "instrument", "mode", "tempo", "instrument_mcq"]
    batch = [AudioPrompt(synthesize_clip(spec, SR), SR, p[t]) for t in tasks]
    out = dict(zip(tasks, model.generate(batch)))
    assert out["instrument"] == "I can hear organ and flute."
    assert "major" in out["caption"] and "organ" in out["caption"] and "BPM" in out["caption"]
    for task in ("mode", "tempo", "instrument_mcq"):
        letter = "ABCD"[correct[task]]
        assert out[task] == f"The correct answer is ({letter}).", (task, out[task])


def test_listener_without_audio_and_on_silence():
    model = DSPListener()
    spec = ClipSpec("x", 90.0, "C", "major", ("bass",), 4.0, 1)
    p, _ = prompts_for(spec)
    text_only = model.generate([AudioPrompt(None, 16000, p[t]) for t in ("instrument", "mode")])
    assert text_only == ["I can't hear any audio.", "The correct answer is (A)."]
    silent = np.zeros(16000 * 4, np.float32)
    out = model.generate([AudioPrompt(silent, 16000, p["instrument"]), AudioPrompt(silent, 16000, p["mode"])])
    assert out[0] == "I can't hear any clear instruments."
    assert out[1] == "The correct answer is (C)."  # no tonal centre


def test_option_parsing_and_choice():
    prompt = "Question: Tempo?\nOptions:\n(A) 60 BPM\n(B) 90 BPM\n(C) 120 BPM\n(D) 150 BPM\nAnswer:"
    assert [l for l, _ in parse_options(prompt)] == ["A", "B", "C", "D"]
    assert parse_options("Describe this piece.") == []
    fast = Analysis(118.0, "C", "major", ("drums",), -12.0, {"drums": 1.0})
    assert answer(prompt, fast) == "The correct answer is (C)."
    inst = "Which instrument?\n(A) piano\n(B) flute\n(C) drums\n(D) violin"
    assert answer(inst, fast) == "The correct answer is (C)."


def test_text_prior_ignores_audio():
    model = TextPrior()
    specs = make_specs(3, 4.0, 0)
    p, _ = prompts_for(specs[0])
    audios = [synthesize_clip(s, SR) for s in specs] + [None, np.zeros(SR, np.float32)]
    for task in ("caption", "instrument", "mode", "tempo", "instrument_mcq"):
        out = model.generate([AudioPrompt(a, SR, p[task]) for a in audios])
        assert len(set(out)) == 1, (task, out)
    assert model.generate([AudioPrompt(None, SR, p["instrument"])]) == ["It sounds like guitar and drums."]
    assert model.generate([AudioPrompt(None, SR, p["tempo"])]) == ["The correct answer is (A)."]
    assert model.generate([AudioPrompt(None, SR, p["caption"])])[0] != ""


def test_null_model_and_registry():
    assert {"dsp_listener", "null", "text_prior"} <= set(MODELS.names())
    null = MODELS.build("null")
    assert isinstance(null, NullModel) and null.max_audio_seconds is None and null.sample_rate == 16000
    assert null.generate([AudioPrompt(None, 16000, "q")] * 3) == ["", "", ""]
    listener = MODELS.build("dsp_listener", sample_rate=22050, max_audio_seconds=10.0)
    assert listener.sample_rate == 22050 and listener.max_audio_seconds == 10.0
    assert DSPListener().sample_rate == 16000 and DSPListener().max_audio_seconds == 30.0
    assert listener.info()["backend"] == "DSPListener"
