"""Tests for the synthetic demo benchmark: reproducibility, item rows, bad clips, speed."""

from __future__ import annotations

import io
import json
import os
import time
from collections import Counter

import numpy as np
import pytest
import soundfile as sf

from evalcore.datasets.base import DATASETS, DatasetContext
from evalcore.datasets.validate import validate_items
from evalcore.datasets.synthetic import (
    INSTRUMENTS,
    MODE_OPTIONS,
    TEMPO_OPTIONS,
    ClipSpec,
    SyntheticBenchmark,
    make_specs,
    synthesize_clip,
    tempo_bucket,
)
from evalcore.datasets.synth_audio import karplus_strong
from evalcore.kinds.base import KINDS
from evalcore.core.schema import ITEM, conform

SR = 22050


def spec(**kw) -> ClipSpec:
    base = dict(clip_id="c", tempo_bpm=120.0, key="C", mode="major",
                instruments=("guitar", "bass"), seconds=2.0, seed=1)
    return ClipSpec(**{**base, **kw})


def dominant_hz(x: np.ndarray, sr: int) -> float:
    mag = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / sr)[np.argmax(mag)])


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> tuple[list[dict], str]:
    root = str(tmp_path_factory.mktemp("run"))
    ds = SyntheticBenchmark(n_clips=6, seconds=2.0, seed=3, bad_clips=5)
    return list(ds.items(DatasetContext(name="synth", run_root=root, seed=0))), root


def test_same_seed_same_samples_different_seed_different():
    a = synthesize_clip(spec(), SR)
    b = synthesize_clip(spec(), SR)
    c = synthesize_clip(spec(seed=2), SR)
    assert a.dtype == np.float32 and a.ndim == 1 and len(a) == 2 * SR
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    assert make_specs(10, 8.0, 5) == make_specs(10, 8.0, 5)
    assert make_specs(10, 8.0, 5) != make_specs(10, 8.0, 6)


def test_clip_is_peak_normalised_and_finite():
    x = synthesize_clip(spec(instruments=("drums", "organ", "flute")), SR)
    assert np.all(np.isfinite(x))
    assert np.abs(x).max() == pytest.approx(0.8, abs=1e-3)


@pytest.mark.parametrize(
    ("instrument", "lo", "hi"),
    [("bass", 38.0, 125.0), ("organ", 125.0, 530.0), ("flute", 500.0, 1600.0)],
)
def test_instrument_register(instrument: str, lo: float, hi: float):
    x = synthesize_clip(spec(instruments=(instrument,), seconds=4.0), SR)
    assert lo <= dominant_hz(x, SR) <= hi


def test_karplus_strong_pitch_and_decay():
    rng = np.random.default_rng(0)
    y = karplus_strong(220.0, SR, SR, rng, t60=0.45)
    head = y[: SR // 4]
    acf = np.correlate(head, head, "full")[len(head) - 1 :]
    lag = 40 + int(np.argmax(acf[40:400]))  # the period: 22050 / 220 ≈ 100 samples
    assert SR / lag == pytest.approx(220.0, rel=0.02)
    early, late = np.abs(y[: SR // 10]).max(), np.abs(y[SR // 2 : SR // 2 + SR // 10]).max()
    assert late < early * 0.1  # > 20 dB down after half a second


def test_specs_balance_and_variety():
    specs = make_specs(48, 8.0, 0)
    counts = Counter(name for s in specs for name in s.instruments)
    assert set(counts) == set(INSTRUMENTS)
    assert max(counts.values()) - min(counts.values()) <= 2
    assert Counter(len(s.instruments) for s in specs) == {1: 16, 2: 16, 3: 16}
    assert len({s.instruments for s in specs}) >= 15
    assert all(60.0 <= s.tempo_bpm <= 160.0 for s in specs)
    assert {s.mode for s in specs} == {"major", "minor"}
    assert len({s.key for s in specs}) >= 8


def test_synthesis_is_fast():
    specs = make_specs(48, 8.0, 0)
    t0 = time.perf_counter()
    for s in specs:
        synthesize_clip(s, SR)
    assert time.perf_counter() - t0 < 10.0


def test_items_conform_and_are_well_formed(rows):
    raw, _ = rows
    items, errors = validate_items("synth", raw)
    assert not errors
    table = conform(items, ITEM)
    assert table.num_rows == len(items) == 11 * 5
    ids = [r["item_id"] for r in items]
    assert len(set(ids)) == len(ids)
    assert "clip0003-factual-instrument" in ids
    for r in items:
        assert r["dataset"] == "synth"
        assert r["protocol"] in KINDS
        assert r["category"] == r["task"]
        assert r["excerpt_start"] == 0.0 and r["excerpt_end"] is None
        json.loads(r["metadata"])
        if r["protocol"] == "mcq":
            assert len(r["options"]) == 4 and 0 <= r["correct_option"] < 4
        if r["protocol"] == "factual":
            assert r["labels"] == sorted(r["labels"]) and set(r["labels"]) <= set(INSTRUMENTS)
        if r["protocol"] == "freeform":
            assert r["reference"]


def test_items_ground_truth_matches_specs(rows):
    items, _ = rows
    by_id = {r["item_id"]: r for r in items}
    for s in make_specs(6, 2.0, 3):
        meta = json.loads(by_id[f"{s.clip_id}-factual-instrument"]["metadata"])
        assert meta["instruments"] == sorted(s.instruments) and meta["mode"] == s.mode
        assert by_id[f"{s.clip_id}-factual-instrument"]["labels"] == sorted(s.instruments)
        tempo = by_id[f"{s.clip_id}-mcq-tempo"]
        assert tempo["options"] == list(TEMPO_OPTIONS)
        assert tempo["correct_option"] == tempo_bucket(s.tempo_bpm)
        mode = by_id[f"{s.clip_id}-mcq-mode"]
        assert mode["options"] == list(MODE_OPTIONS)
        tonal = s.instruments != ("drums",)
        assert mode["correct_option"] == ({"major": 0, "minor": 1}[s.mode] if tonal else 2)
        mcq = by_id[f"{s.clip_id}-mcq-instrument_mcq"]
        present = [o for o in mcq["options"] if o in s.instruments]
        assert present == [mcq["options"][mcq["correct_option"]]]
        caption = by_id[f"{s.clip_id}-freeform-caption"]["reference"]
        assert f"{s.tempo_bpm:g} beats per minute" in caption
        assert all(name in caption for name in s.instruments)


def test_tempo_bucket():
    assert [tempo_bucket(t) for t in (60, 84, 86, 116, 144, 146, 160)] == [0, 0, 1, 2, 2, 3, 3]


def test_audio_files_written_and_readable(rows):
    items, root = rows
    uri = next(r["audio_uri"] for r in items if r["item_id"] == "clip0000-factual-instrument")
    assert uri.startswith(os.path.join(root, "demo_audio"))
    data, sr = sf.read(uri, dtype="float32")
    assert sr == SR and len(data) == 2 * SR
    expected = synthesize_clip(make_specs(6, 2.0, 3)[0], SR)
    assert np.max(np.abs(data - expected)) < 1e-4  # PCM_16 quantisation only


def test_unchanged_files_are_not_rewritten(tmp_path):
    ds = SyntheticBenchmark(n_clips=2, seconds=1.0, seed=0, audio_dir=str(tmp_path / "a"))
    ctx = DatasetContext(name="s", run_root=str(tmp_path), seed=0)
    list(ds.items(ctx))
    path = str(tmp_path / "a" / "clip0000.wav")
    before = os.stat(path).st_mtime_ns
    time.sleep(0.01)
    list(ds.items(ctx))
    assert os.stat(path).st_mtime_ns == before


def test_bad_clips_are_what_they_say(rows):
    items, _ = rows
    bad = {}
    for r in items:
        meta = json.loads(r["metadata"])
        if "bad" in meta:
            bad.setdefault(meta["bad"], set()).add(r["audio_uri"])
    assert set(bad) == {"missing", "corrupt", "truncated", "nan"}
    assert sum(len(u) for u in bad.values()) == 5  # cycles: the 5th clip is missing again
    assert sum(1 for r in items if "bad" in json.loads(r["metadata"])) == 5 * 5
    for uri in bad["missing"]:
        assert not os.path.exists(uri)
    (corrupt,) = bad["corrupt"]
    with pytest.raises(sf.LibsndfileError):
        sf.read(corrupt)
    (truncated,) = bad["truncated"]
    with open(truncated, "rb") as f:
        raw = f.read()
    data_at = raw.index(b"data")
    claimed = int.from_bytes(raw[data_at + 4 : data_at + 8], "little")  # bytes of samples
    present = len(raw) - (data_at + 8)
    assert claimed >= 2 * present - 8  # the header claims about twice what is there
    assert len(sf.read(io.BytesIO(raw))[0]) < claimed // 2
    (nan,) = bad["nan"]
    data, _ = sf.read(nan, dtype="float32")
    assert sf.info(nan).subtype == "FLOAT" and np.isnan(data).any()


def test_registered_and_validates_format():
    assert DATASETS.get("synthetic") is SyntheticBenchmark
    with pytest.raises(ValueError):
        SyntheticBenchmark(format="mp3")


def test_flac_format(tmp_path):
    ds = SyntheticBenchmark(n_clips=1, seconds=1.0, format="flac")
    items = list(ds.items(DatasetContext(name="s", run_root=str(tmp_path), seed=0)))
    assert items[0]["audio_uri"].endswith(".flac")
    assert sf.info(items[0]["audio_uri"]).format == "FLAC"
