"""Tests for evalcore.core.audio: decoding, mono mixdown, excerpts, resampling, chunking, errors."""

from __future__ import annotations

import io
import pickle
import struct

import numpy as np
import pytest
import soundfile as sf

from evalcore.core import audio
from evalcore.core.audio import AudioError

SR = 16000


def sine(freq: float, seconds: float, sr: int = SR, amp: float = 0.5) -> np.ndarray:
    t = np.arange(int(round(seconds * sr))) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def encode(x: np.ndarray, sr: int = SR, fmt: str = "WAV", subtype: str | None = None) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, x, sr, format=fmt, subtype=subtype)
    return buf.getvalue()


def write(tmp_path, name: str, data: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def reason_of(fn, *args, **kwargs) -> str:
    with pytest.raises(AudioError) as ei:
        fn(*args, **kwargs)
    assert str(ei.value)  # a human message is always there
    return ei.value.reason


def dominant_freq(x: np.ndarray, sr: int) -> float:
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.argmax(spec) * sr / len(x))


def mp3_test_signal(sr: int, seconds: float) -> np.ndarray:
    # a quiet, amplitude-modulated tone encodes at a very low bitrate, so Layer III frames
    # lean hard on the bit reservoir -- the case where naive MP3 seeking decodes garbage.
    t = np.arange(int(seconds * sr)) / sr
    return (0.1 * np.sin(2 * np.pi * 440 * t) * (1 + 0.5 * np.sin(2 * np.pi * 0.5 * t))).astype(np.float32)


def test_mp3_is_available():
    assert "MP3" in sf.available_formats()


# --------------------------------------------------------------------------- decode


@pytest.mark.parametrize(
    ("fmt", "subtype", "ext"),
    [("WAV", "PCM_16", "wav"), ("WAV", "FLOAT", "wav"), ("FLAC", "PCM_16", "flac"), ("FLAC", "PCM_24", "flac")],
)
def test_lossless_roundtrip_exact(tmp_path, fmt, subtype, ext):
    x = sine(440, 1.5)
    path = write(tmp_path, f"a.{ext}", encode(x, SR, fmt, subtype))
    y, sr = audio.decode(audio.fetch(path))
    assert sr == SR and y.dtype == np.float32 and y.ndim == 1 and len(y) == len(x)
    tol = 1e-7 if subtype == "FLOAT" else 1.0 / 2 ** (int(subtype[-2:]) - 1)
    np.testing.assert_allclose(y, x, atol=tol)


def test_int16_samples_scale_to_unit_float():
    ints = np.array([0, 1, -1, 16384, -16384, 32767, -32768] * 100, dtype=np.int16)
    y, sr = audio.decode(encode(ints, 8000, "WAV", "PCM_16"))
    assert sr == 8000 and y.dtype == np.float32
    np.testing.assert_array_equal(y, ints.astype(np.float32) / 32768.0)


def test_mp3_decodes_to_same_length_and_pitch():
    x = sine(1000, 2.0, 44100)
    y, sr = audio.decode(encode(x, 44100, "MP3", "MPEG_LAYER_III"))
    assert sr == 44100 and y.dtype == np.float32 and y.ndim == 1
    assert len(y) == len(x)  # LAME/Xing header → gapless length
    assert abs(dominant_freq(y, sr) - 1000) < 5
    assert np.corrcoef(x[4410:-4410], y[4410:-4410])[0, 1] > 0.95


@pytest.mark.parametrize("channels", [2, 8])
@pytest.mark.parametrize(("fmt", "subtype"), [("WAV", "FLOAT"), ("WAV", "PCM_16"), ("FLAC", "PCM_16")])
def test_multichannel_is_channel_mean(channels, fmt, subtype):
    rng = np.random.default_rng(channels)
    x = (0.4 * rng.standard_normal((SR, channels))).clip(-0.99, 0.99).astype(np.float32)
    data = encode(x, SR, fmt, subtype)
    stored, _ = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)  # what the file really holds
    assert stored.shape == (SR, channels)
    y, sr = audio.decode(data)
    assert y.shape == (SR,) and y.dtype == np.float32 and sr == SR
    np.testing.assert_allclose(y, stored.mean(axis=1), atol=1e-6)
    assert not np.allclose(y, stored[:, 0], atol=1e-3)  # really mixed, not just channel 0


def test_stereo_mp3_is_channel_mean():
    left, right = sine(440, 1.0, 44100), sine(660, 1.0, 44100, amp=0.3)
    data = encode(np.stack([left, right], axis=1), 44100, "MP3", "MPEG_LAYER_III")
    stored, _ = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    y, _ = audio.decode(data)
    np.testing.assert_allclose(y, stored.mean(axis=1), atol=1e-6)


# --------------------------------------------------------------------------- excerpts


@pytest.mark.parametrize(("fmt", "subtype"), [("WAV", "PCM_16"), ("WAV", "FLOAT"), ("FLAC", "PCM_24")])
@pytest.mark.parametrize(
    ("start", "end"),
    # 1.001 * 16000 == 16015.999999999998 in floats: frame indices are rounded, not floored
    [(0.25, 1.5), (1.0, 1.0005), (0.0, 0.3), (2.9, 3.0), (0.3, None), (None, 0.7), (1.001, 2.003), (0.25, 1.001)],
)
def test_excerpt_reads_exact_frames(fmt, subtype, start, end):
    rng = np.random.default_rng(0)
    x = (0.3 * rng.standard_normal((3 * SR, 2))).astype(np.float32)
    data = encode(x, SR, fmt, subtype)
    full, _ = audio.decode(data)
    y, sr = audio.decode(data, start, end)
    a = 0 if start is None else round(start * sr)
    b = len(full) if end is None else round(end * sr)
    assert len(y) == b - a
    np.testing.assert_array_equal(y, full[a:b])


@pytest.mark.parametrize("sr", [16000, 22050, 44100])
def test_mp3_excerpt_matches_full_decode(sr):
    # mpg123 seeks land without the bit reservoir; decode() pre-rolls to stay sample exact.
    data = encode(mp3_test_signal(sr, 6.0), sr, "MP3", "MPEG_LAYER_III")
    full, _ = audio.decode(data)
    for start, end in [(1.3, 2.1), (2.77, 3.5), (4.1, None), (0.01, 0.5)]:
        y, _ = audio.decode(data, start, end)
        a = round(start * sr)
        b = len(full) if end is None else round(end * sr)
        assert len(y) == b - a
        np.testing.assert_allclose(y, full[a:b], atol=1e-6)


def test_excerpt_end_beyond_file_is_clipped():
    x = sine(440, 2.0)
    y, _ = audio.decode(encode(x, SR, "WAV", "FLOAT"), 1.5, 10.0)
    np.testing.assert_array_equal(y, x[round(1.5 * SR) :])


def test_excerpt_rounding_to_zero_frames_is_empty():
    assert reason_of(audio.decode, encode(sine(440, 1.0)), 0.5, 0.50001) == "empty"


@pytest.mark.parametrize(
    ("start", "end"),
    [(1.0, 1.0), (1.5, 0.5), (-0.1, 0.5), (None, 0.0), (None, -1.0), (2.0, None), (5.0, 6.0), (3.0, 4.0),
     (float("nan"), 1.0), (0.0, float("inf"))],
)
def test_bad_excerpts(start, end):
    data = encode(sine(440, 2.0))  # 2 s long
    assert reason_of(audio.decode, data, start, end) == "bad_excerpt"


def test_excerpt_start_just_before_end_is_fine():
    y, _ = audio.decode(encode(sine(440, 2.0)), 1.999, None)
    assert len(y) == SR * 2 - round(1.999 * SR)


# --------------------------------------------------------------------------- errors


def test_missing_file(tmp_path):
    assert reason_of(audio.fetch, str(tmp_path / "nope.wav")) == "missing"
    assert reason_of(audio.load, str(tmp_path / "nope.wav"), SR) == "missing"


def test_directory_is_unreadable(tmp_path):
    assert reason_of(audio.fetch, str(tmp_path)) == "unreadable"


@pytest.mark.parametrize("exc", [PermissionError(13, "Permission denied"), OSError("connection reset")])
def test_permission_and_io_errors_are_unreadable(monkeypatch, exc):
    def boom(uri):
        raise exc

    monkeypatch.setattr(audio.storage, "read_bytes", boom)
    assert reason_of(audio.fetch, "s3://bucket/key.wav") == "unreadable"


def test_corrupt_bytes(tmp_path):
    rng = np.random.default_rng(0)
    path = write(tmp_path, "junk.wav", rng.integers(0, 256, 5000, dtype=np.uint8).tobytes())
    assert reason_of(audio.load, path, SR) == "corrupt"
    assert reason_of(audio.decode, b"RIFF\x00\x00\x00\x00WAVEnot really a wav file") == "corrupt"


def test_zero_length_file(tmp_path):
    path = write(tmp_path, "zero.wav", b"")
    assert reason_of(audio.load, path, SR) == "empty"


def test_wav_with_zero_frames(tmp_path):
    data = encode(np.zeros(0, np.float32), SR, "WAV", "PCM_16")
    assert len(data) == 44
    assert reason_of(audio.load, write(tmp_path, "none.wav", data), SR) == "empty"


@pytest.mark.parametrize("cut", [0.5, 0.9, 0.999])
@pytest.mark.parametrize(
    ("fmt", "subtype", "channels"),
    [("WAV", "PCM_16", 1), ("WAV", "PCM_16", 2), ("WAV", "FLOAT", 2), ("WAV", "PCM_24", 8), ("WAVEX", "PCM_16", 2)],
)
def test_truncated_wav(tmp_path, cut, fmt, subtype, channels):
    x = np.tile(sine(440, 2.0)[:, None], (1, channels))
    data = encode(x, SR, fmt, subtype)
    cut_data = data[: int(len(data) * cut)]
    # libsndfile itself opens and reads this without complaint -- just fewer frames
    assert len(sf.read(io.BytesIO(cut_data))[0]) < len(x)
    path = write(tmp_path, "cut.wav", cut_data)
    assert reason_of(audio.load, path, SR) == "truncated"
    assert reason_of(audio.decode, cut_data, 0.0, 0.1) == "truncated"  # even when the excerpt is present


@pytest.mark.parametrize("nbytes", [1, 3, 4])
def test_wav_missing_last_bytes_is_truncated(nbytes):
    data = encode(np.stack([sine(440, 1.0)] * 2, axis=1), SR, "WAV", "PCM_16")
    assert reason_of(audio.decode, data[:-nbytes]) == "truncated"


def _riff(chunks: list[tuple[bytes, bytes]], data_size: int | None = None) -> bytes:
    body = b"WAVE"
    for cid, payload in chunks:
        size = len(payload) if (cid != b"data" or data_size is None) else data_size
        body += cid + struct.pack("<I", size) + payload + (b"\x00" if len(payload) % 2 else b"")
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _fmt(channels: int = 1, sr: int = SR, bits: int = 16) -> bytes:
    align = channels * bits // 8
    return struct.pack("<HHIIHH", 1, channels, sr, sr * align, align, bits)


def test_wav_with_odd_chunk_before_data_and_trailing_chunk_is_not_truncated():
    pcm = (sine(440, 0.5) * 32767).astype("<i2").tobytes()
    data = _riff([(b"fmt ", _fmt()), (b"junk", b"abc"), (b"data", pcm), (b"LIST", b"INFOxxxx")])
    y, sr = audio.decode(data)
    assert sr == SR and len(y) == len(pcm) // 2


def test_truncated_wav_with_odd_chunk_before_data():
    pcm = (sine(440, 0.5) * 32767).astype("<i2").tobytes()
    data = _riff([(b"fmt ", _fmt()), (b"junk", b"abc"), (b"data", pcm)])
    assert len(audio.decode(data)[0]) == len(pcm) // 2
    assert reason_of(audio.decode, data[:-100]) == "truncated"


def test_wav_with_streaming_data_size_is_not_flagged():
    pcm = (sine(440, 0.5) * 32767).astype("<i2").tobytes()
    data = _riff([(b"fmt ", _fmt()), (b"data", pcm)], data_size=0xFFFFFFFF)
    y, _ = audio.decode(data)
    assert len(y) == len(pcm) // 2


def test_wav_written_with_metadata_is_not_truncated():
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", SR, 1, format="WAV", subtype="PCM_16") as f:
        f.title = "a title"
        f.write(sine(440, 0.5))
    y, _ = audio.decode(buf.getvalue())
    assert len(y) == SR // 2


@pytest.mark.parametrize("cut", [0.5, 0.8])
def test_truncated_mp3(cut):
    sr = 44100
    data = encode(sine(440, 3.0, sr), sr, "MP3", "MPEG_LAYER_III")
    cut_data = data[: int(len(data) * cut)]
    # libsndfile reports the Xing-header length but decodes fewer frames, silently
    with sf.SoundFile(io.BytesIO(cut_data)) as f:
        assert f.frames == 3 * sr and len(f.read()) < 3 * sr
    assert reason_of(audio.decode, cut_data) == "truncated"
    assert reason_of(audio.decode, cut_data, 2.5, None) == "truncated"
    y, _ = audio.decode(cut_data, 0.0, 0.2)  # an excerpt inside the surviving part still decodes
    assert len(y) == round(0.2 * sr)


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.9, 0.99])
def test_truncated_flac(cut):
    data = encode(sine(440, 3.0), SR, "FLAC", "PCM_16")
    cut_data = data[: int(len(data) * cut)]
    # STREAMINFO keeps the full length; libFLAC fails ("lost sync") once it runs out of bytes,
    # even on a frame boundary -- indistinguishable from damage inside the stream, so it is
    # "corrupt" (a decoder that read short instead would give "truncated").
    with sf.SoundFile(io.BytesIO(cut_data)) as f:
        assert f.frames == 3 * SR
    assert reason_of(audio.decode, cut_data) in ("corrupt", "truncated")
    y, _ = audio.decode(cut_data, 0.0, 0.05)  # an excerpt inside the surviving part still decodes
    assert len(y) == round(0.05 * SR)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("subtype", ["FLOAT", "DOUBLE"])
def test_non_finite_samples(tmp_path, bad, subtype):
    x = sine(440, 1.0).astype(np.float64)
    x[1234] = bad
    path = write(tmp_path, "nan.wav", encode(x, SR, "WAV", subtype))
    assert reason_of(audio.load, path, SR) == "non_finite"


def test_non_finite_in_one_channel_of_stereo():
    x = np.stack([sine(440, 1.0), sine(220, 1.0)], axis=1)
    x[5000, 1] = np.nan
    assert reason_of(audio.decode, encode(x, SR, "WAV", "FLOAT")) == "non_finite"
    # outside the excerpt it does not matter
    y, _ = audio.decode(encode(x, SR, "WAV", "FLOAT"), 0.5, None)
    assert np.isfinite(y).all()


def test_load_prefixes_uri_in_message(tmp_path):
    path = write(tmp_path, "zero.wav", b"")
    with pytest.raises(AudioError) as ei:
        audio.load(path, SR)
    assert path in str(ei.value) and ei.value.reason == "empty"


def test_audio_error_pickles():
    e = pickle.loads(pickle.dumps(AudioError("corrupt", "bad bytes")))
    assert isinstance(e, AudioError) and e.reason == "corrupt" and str(e) == "bad bytes"


# --------------------------------------------------------------------------- resample


@pytest.mark.parametrize(("sr", "target"), [(44100, 16000), (22050, 16000), (16000, 24000), (48000, 44100)])
def test_resample_length_and_frequency(sr, target):
    x = sine(1000, 2.0, sr)
    y = audio.resample(x, sr, target)
    assert y.dtype == np.float32 and y.ndim == 1
    assert abs(len(y) - len(x) * target / sr) <= 1
    assert abs(dominant_freq(y, target) - 1000) < 2
    # amplitude preserved away from the edges
    mid = y[len(y) // 4 : 3 * len(y) // 4]
    assert abs(np.sqrt(np.mean(mid**2)) - 0.5 / np.sqrt(2)) < 0.01


def test_resample_is_high_quality_band_limited():
    # HQ keeps a tone close to the new Nyquist and removes one above it (no aliasing)
    y = audio.resample(sine(7000, 1.0, 44100), 44100, 16000)[2000:-2000]
    assert abs(np.sqrt(np.mean(y**2)) - 0.5 / np.sqrt(2)) < 0.005
    y = audio.resample(sine(9000, 1.0, 44100), 44100, 16000)[2000:-2000]
    assert np.sqrt(np.mean(y**2)) < 1e-3


def test_resample_same_rate_is_noop():
    x = sine(1000, 0.5, 48000)
    assert audio.resample(x, 48000, 48000) is x


def test_resample_converts_to_float32():
    y = audio.resample(sine(1000, 0.5, 22050).astype(np.float64), 22050, 16000)
    assert y.dtype == np.float32
    assert audio.resample(np.zeros(10), 16000, 16000).dtype == np.float32


def test_load_excerpt_resampled(tmp_path):
    path = write(tmp_path, "a.flac", encode(sine(440, 4.0, 44100), 44100, "FLAC", "PCM_16"))
    y = audio.load(path, SR, 1.0, 3.0)
    assert y.dtype == np.float32 and abs(len(y) - 2 * SR) <= 1
    assert abs(dominant_freq(y, SR) - 440) < 2


# --------------------------------------------------------------------------- chunk


def test_chunk_window_none():
    x = np.arange(100, dtype=np.float32)
    (only,) = audio.chunk(x, 10, None)
    assert only is x


@pytest.mark.parametrize("n", [1, 50, 100])
def test_chunk_audio_not_longer_than_window(n):
    x = np.arange(n, dtype=np.float32)
    assert [len(p) for p in audio.chunk(x, 10, 10.0)] == [n]


def test_chunk_exact_multiple():
    x = np.arange(300, dtype=np.float32)
    pieces = audio.chunk(x, 10, 10.0)
    assert [len(p) for p in pieces] == [100, 100, 100]
    np.testing.assert_array_equal(np.concatenate(pieces), x)


def test_chunk_short_tail_dropped():
    x = np.arange(205, dtype=np.float32)  # tail of 5 samples = 0.5 s < 1 s
    pieces = audio.chunk(x, 10, 10.0)
    assert [len(p) for p in pieces] == [100, 100]
    np.testing.assert_array_equal(pieces[1], x[100:200])


def test_chunk_long_enough_tail_kept():
    x = np.arange(215, dtype=np.float32)  # tail of 1.5 s
    pieces = audio.chunk(x, 10, 10.0)
    assert [len(p) for p in pieces] == [100, 100, 15]
    np.testing.assert_array_equal(np.concatenate(pieces), x)
    assert [len(p) for p in audio.chunk(x, 10, 10.0, min_last_s=2.0)] == [100, 100]


def test_chunk_short_only_piece_kept():
    x = np.arange(5, dtype=np.float32)  # 0.5 s, shorter than min_last_s, but it is all there is
    assert [len(p) for p in audio.chunk(x, 10, 10.0)] == [5]


def test_chunk_full_last_window_kept_even_if_min_last_exceeds_window():
    x = np.arange(40, dtype=np.float32)
    assert [len(p) for p in audio.chunk(x, 10, 2.0, min_last_s=5.0)] == [20, 20]


def test_chunk_real_rate():
    x = np.zeros(int(31.2 * SR), dtype=np.float32)
    assert [len(p) for p in audio.chunk(x, SR, 10.0)] == [10 * SR] * 3 + [len(x) - 30 * SR]  # 1.2 s tail kept
    x = np.zeros(int(30.5 * SR), dtype=np.float32)
    assert [len(p) for p in audio.chunk(x, SR, 10.0)] == [10 * SR] * 3


def test_chunk_bad_window():
    with pytest.raises(ValueError):
        audio.chunk(np.zeros(10, np.float32), 10, 0.0)


# --------------------------------------------------------------------------- controls


def test_silence_like():
    s = audio.silence_like(1234)
    assert s.dtype == np.float32 and s.shape == (1234,) and not s.any()


@pytest.mark.parametrize("rms", [0.1, 0.02, 1.0])
def test_noise_like_seeded_with_rms(rms):
    a = audio.noise_like(SR * 3, seed=7, rms=rms)
    b = audio.noise_like(SR * 3, seed=7, rms=rms)
    c = audio.noise_like(SR * 3, seed=8, rms=rms)
    assert a.dtype == np.float32 and a.shape == (SR * 3,)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    assert np.sqrt(np.mean(a.astype(np.float64) ** 2)) == pytest.approx(rms, rel=1e-4)
    assert abs(a.mean()) < 0.01 * rms * 10 and np.isfinite(a).all()


def test_noise_like_default_rms_and_edge_sizes():
    assert np.sqrt(np.mean(audio.noise_like(10000, 0).astype(np.float64) ** 2)) == pytest.approx(0.1, rel=1e-4)
    assert audio.noise_like(0, 1).shape == (0,)
    assert audio.noise_like(10, -3).shape == (10,)  # a negative seed from an int64 column still works
