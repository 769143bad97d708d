"""A weight-free "Music LM" that really listens: DSP analysis + templated answers.

It estimates tempo (spectral-flux autocorrelation), key and mode (chroma ×
Krumhansl–Kessler profiles) and the instruments of the synthetic benchmark's
closed vocabulary (band / sustain / transient features), then answers the prompt
from that analysis. Pure numpy; it is the positive control of the offline demo.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import soxr

from evalcore.models.base import MODELS, AudioPrompt, MusicLM
from evalcore.models.checkpoint import CheckpointError, read_checkpoint_json, resolve_checkpoint
from evalcore.core.params import PathStr, Rate, Seconds

ANALYSIS_SR = 16_000
NOTE_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
INSTRUMENTS = ("guitar", "drums", "bass", "organ", "flute")
SILENCE_DBFS = -60.0
_CACHE_SIZE = 256  # analyses kept per model actor
# Krumhansl–Kessler key profiles (tonic first)
KK_MAJOR = np.array([6.35, 2.23, 3.48, 2.33, 4.38, 4.09, 2.52, 5.19, 2.39, 3.66, 2.29, 2.88])
KK_MINOR = np.array([6.33, 2.68, 3.52, 5.38, 2.60, 3.53, 2.54, 4.75, 3.98, 2.69, 3.34, 3.17])
# instrument score thresholds (tuned on the synthetic benchmark, seeds 0–2)
THRESHOLDS = {"guitar": 0.03, "drums": 0.001, "bass": 0.08, "organ": 0.06, "flute": 0.05}


@dataclass(frozen=True)
class Analysis:
    """What the listener heard."""

    tempo_bpm: float | None
    key: str | None
    mode: str | None
    instruments: tuple[str, ...]
    loudness: float  # RMS level in dBFS
    scores: dict[str, float] = field(default_factory=dict)  # instrument evidence


# ---------------------------------------------------------------- spectra


def _power_spectrogram(x: np.ndarray, n_fft: int, hop: int) -> np.ndarray:
    """|STFT|² with a Hann window, shape (frames, n_fft // 2 + 1)."""
    if len(x) < n_fft:
        x = np.pad(x, (0, n_fft - len(x)))
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop]
    return np.abs(np.fft.rfft(frames * np.hanning(n_fft), axis=1)) ** 2


def _filter_axis(a: np.ndarray, radius: int, axis: int, op: Any) -> np.ndarray:
    """A running min/max (``op``) of half-width ``radius`` along ``axis`` (edge-padded)."""
    if radius <= 0:
        return a
    pad = [(0, 0)] * a.ndim
    pad[axis] = (radius, radius)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(a, pad, mode="edge"), 2 * radius + 1, axis)
    return op(windows, axis=-1)


def _running_min_one_sided(a: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Running minima along axis 0 over the past and the future ``length`` frames (inclusive)."""
    padded = np.pad(a, ((length, length), (0, 0)), mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, length + 1, axis=0)
    n = a.shape[0]
    return windows[:n].min(axis=-1), windows[length : length + n].min(axis=-1)


def _local_floor(p: np.ndarray, factor: float, radius: int = 12) -> np.ndarray:
    """``factor`` × the lower quartile, over ±``radius`` bins, of each bin's median over time."""
    med = np.median(p, axis=0)
    padded = np.pad(med, radius, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1)
    return factor * np.percentile(windows, 25, axis=1)[None, :]


def _band(freqs: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return (freqs >= lo) & (freqs < hi)


def _harmonic_excess(s: np.ndarray, freqs: np.ndarray, lo: float, hi: float) -> float:
    """Energy of ``s`` in [lo, hi) not explained as 2nd/3rd harmonics of lower partials."""
    df = freqs[1]
    idx = np.flatnonzero(_band(freqs, lo, hi))
    lower = np.zeros((s.shape[0], len(idx)))
    for k, weight in ((2, 0.15), (3, 0.04)):
        src = np.clip(np.round(freqs[idx] / k / df).astype(int), 0, s.shape[1] - 1)
        near = np.maximum.reduce([s[:, np.clip(src + d, 0, s.shape[1] - 1)] for d in (-1, 0, 1)])
        lower += weight * near
    return float(np.maximum(s[:, idx] - lower, 0.0).sum())


# ---------------------------------------------------------------- instruments


def instrument_scores(x: np.ndarray, sr: int = ANALYSIS_SR) -> dict[str, float]:
    """Evidence (fraction of total energy) for each instrument of the vocabulary."""
    n_fft, hop = 2048, 256
    p = _power_spectrogram(x, n_fft, hop)
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    total = float(p.sum()) + 1e-20
    # sustained part: per-bin running minimum over ±80 ms (after a ±1-bin max for vibrato)
    sustained = _filter_axis(_filter_axis(p, 1, 1, np.max), 5, 0, np.min)
    # noise floors: per frame across all bins, and per bin from its frequency neighbourhood
    floor = np.maximum(3.0 * np.median(sustained, axis=1, keepdims=True), _local_floor(sustained, 3.0))
    tonal = np.maximum(np.minimum(sustained, p) - floor, 0.0)
    # bumps: energy above both the minimum of the past and of the future 80 ms (plucks, hits)
    past, future = _running_min_one_sided(p, 5)
    bump_floor = np.maximum(3.0 * np.median(p, axis=1, keepdims=True), _local_floor(p, 5.0))
    bumps = np.maximum(p - np.maximum(past, future) - bump_floor, 0.0)
    high = p[:, _band(freqs, 5000.0, 8000.0)].sum(axis=1)
    high_floor = 1.5 * _filter_axis(high, 10, 0, np.min)
    return {
        "bass": float(tonal[:, _band(freqs, 30.0, 125.0)].sum()) / total,
        "organ": _harmonic_excess(tonal, freqs, 125.0, 490.0) / total,
        "flute": _harmonic_excess(tonal, freqs, 490.0, 1700.0) / total,
        "guitar": float(bumps[:, _band(freqs, 140.0, 520.0)].sum()) / total,
        "drums": float(np.maximum(high - high_floor, 0.0).sum()) / total,
    }


# ---------------------------------------------------------------- tempo


def onset_envelope(x: np.ndarray, sr: int = ANALYSIS_SR, hop: int = 128) -> tuple[np.ndarray, float]:
    """Spectral-flux onset strength (log magnitude, half-wave rectified) and its frame rate."""
    mag = np.sqrt(_power_spectrogram(x, 1024, hop))
    logmag = np.log1p(100.0 * mag / (mag.max() + 1e-12))
    flux = np.maximum(np.diff(logmag, axis=0), 0.0).sum(axis=1)
    flux -= np.convolve(flux, np.ones(33) / 33.0, mode="same")  # remove slow trends
    return np.maximum(flux, 0.0), sr / hop


def estimate_tempo(x: np.ndarray, sr: int = ANALYSIS_SR, lo: float = 60.0, hi: float = 180.0) -> float | None:
    """Tempo (BPM) from the autocorrelation of the onset envelope, with octave disambiguation."""
    env, fps = onset_envelope(x, sr)
    if env.size < 8 or not np.any(env > 0):
        return None
    env = env - env.mean()
    n = len(env)
    spec = np.fft.rfft(env, 2 * n)
    acf = np.fft.irfft(np.abs(spec) ** 2)[:n]
    acf /= acf[0] + 1e-12
    acf *= n / np.maximum(n - np.arange(n), 1)  # unbias
    bpms = np.arange(lo, hi + 0.25, 0.5)

    def comb(bpm: np.ndarray) -> np.ndarray:
        lags = 60.0 * fps / bpm
        out = np.zeros_like(bpm)
        for k in (1, 2, 3, 4):
            lag = k * lags
            ok = lag < 0.6 * n
            out += np.where(ok, np.interp(np.minimum(lag, n - 1), np.arange(n), acf), 0.0) / k
        return out

    best = float(bpms[np.argmax(comb(bpms))])
    # octave check: prefer the faster of (best, 2·best) when its evidence is nearly as strong
    double = best * 2.0
    if double <= hi and comb(np.array([double]))[0] >= 0.8 * comb(np.array([best]))[0]:
        best = double
    return best


# ---------------------------------------------------------------- key


def chroma(x: np.ndarray, sr: int = ANALYSIS_SR) -> np.ndarray:
    """A 12-bin pitch-class profile (C first) of the power between 38 Hz and 2.1 kHz."""
    n_fft = 16384
    power = _power_spectrogram(x, n_fft, n_fft // 4).sum(axis=0)
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    sel = _band(freqs, 38.0, 2100.0)
    midi = 69.0 + 12.0 * np.log2(freqs[sel] / 440.0)
    pcs = np.round(midi).astype(int) % 12
    weights = power[sel] * (np.abs(midi - np.round(midi)) < 0.35)
    return np.bincount(pcs, weights=weights, minlength=12)


def estimate_key(x: np.ndarray, sr: int = ANALYSIS_SR) -> tuple[str | None, str | None]:
    """(root name, "major"/"minor") maximising the profile correlation; (None, None) if atonal."""
    c = chroma(x, sr)
    if c.sum() <= 0 or np.std(c) < 1e-6 * c.mean():
        return None, None
    best, best_r = (None, None), -np.inf
    for mode, profile in (("major", KK_MAJOR), ("minor", KK_MINOR)):
        for root in range(12):
            r = np.corrcoef(c, np.roll(profile, root))[0, 1]
            if r > best_r:
                best, best_r = (NOTE_NAMES[root], mode), r
    return best


# ---------------------------------------------------------------- analysis


#: the analyses a checkpoint can switch off (``listener.json`` ``deaf_to``)
ANALYSES = ("tempo", "key", "timbre")
LISTENER_FILE = "listener.json"


def analyze(audio: np.ndarray, sr: int, deaf_to: frozenset[str] = frozenset()) -> Analysis:
    """Tempo, key, mode and instruments of ``audio`` (mono float at ``sr``), minus the analyses in ``deaf_to``
    (deaf to timbre: instruments still gate "is there music", but none is named)."""
    x = np.nan_to_num(np.asarray(audio, dtype=np.float64).reshape(-1))
    if sr != ANALYSIS_SR and x.size:
        x = soxr.resample(x, sr, ANALYSIS_SR).astype(np.float64)
    rms = float(np.sqrt(np.mean(x**2))) if x.size else 0.0
    loudness = float(20.0 * np.log10(max(rms, 1e-10)))
    if loudness < SILENCE_DBFS or x.size < ANALYSIS_SR // 4:
        return Analysis(None, None, None, (), loudness, {})
    x = x / (np.abs(x).max() + 1e-12)
    scores = instrument_scores(x)
    found = tuple(s for s in INSTRUMENTS if scores[s] >= THRESHOLDS[s])
    if not found:  # noise or something outside the vocabulary: no beat, no key
        return Analysis(None, None, None, (), loudness, scores)
    key, mode = estimate_key(x) if any(s != "drums" for s in found) else (None, None)
    if "key" in deaf_to:
        key, mode = None, None
    tempo = None if "tempo" in deaf_to else estimate_tempo(x)
    if "timbre" in deaf_to:
        found, scores = (), {}
    return Analysis(tempo, key, mode, found, loudness, scores)


# ---------------------------------------------------------------- answering

_OPTION = re.compile(r"^\s*\(?([A-Z])[\).:]\s+(.+?)\s*$", re.MULTILINE)


_INLINE_OPTION = re.compile(r"\(([A-Z])\)\s+(.+?)\s*(?=\([A-Z]\)\s|\n|$)")


def parse_options(prompt: str) -> list[tuple[str, str]]:
    """Lettered options in the prompt, as (letter, text): one a line ("(A) text", "A: text"), else on one
    line as MuChoMusic's released prompt writes them ("(A) text (B) text "); the last block of options counts
    (in-context examples come before the question)."""
    for pattern, text in ((_OPTION, prompt), (_INLINE_OPTION, prompt.rsplit("\n Options: ", 1)[-1])):
        found = pattern.findall(text)
        letters = [l for l, _ in found]
        if letters and letters == [chr(65 + i) for i in range(len(letters))]:
            return found
    return []


def _join(words: Sequence[str]) -> str:
    words = list(words)
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"\b{re.escape(word)}s?\b", text.lower()) is not None


def choose_option(options: list[tuple[str, str]], question: str, a: Analysis) -> str:
    """The letter of the option that best matches the analysis."""
    texts = [t.lower() for _, t in options]
    q = question.lower()
    numbers = [re.findall(r"\d+(?:\.\d+)?", t) for t in texts]
    if ("tempo" in q or "bpm" in q or any("bpm" in t for t in texts)) and any(numbers):
        if a.tempo_bpm is None:
            return options[0][0]
        dist = [
            min(abs(np.log2(float(v) / a.tempo_bpm)) for v in nums) if nums else np.inf
            for nums in numbers
        ]
        return options[int(np.argmin(dist))][0]
    if any("major" in t or "minor" in t for t in texts):
        for i, t in enumerate(texts):
            if a.mode is None and ("atonal" in t or "no tonal" in t):
                return options[i][0]
            if a.mode and a.mode in t and ({"major", "minor"} - {a.mode}).pop() not in t:
                return options[i][0]
        return options[0][0]
    named = [(i, s) for i, t in enumerate(texts) for s in INSTRUMENTS if _mentions(t, s)]
    if named:
        i, _ = max(named, key=lambda p: (p[1] in a.instruments, a.scores.get(p[1], 0.0)))
        return options[i][0]
    return options[0][0]


def describe(a: Analysis) -> str:
    """The templated description of an analysis."""
    if not a.instruments and a.tempo_bpm is None and a.mode is None:  # nothing musical heard
        if a.loudness < SILENCE_DBFS:
            return "I can't hear any music, only silence."
        return "I can only hear noise, no recognisable music."
    parts = [f"A {a.mode} piece in {a.key}" if a.mode else "A piece with no clear key"]
    if a.tempo_bpm is not None:
        parts.append(f" at around {a.tempo_bpm:.0f} BPM")
    inst = _join(a.instruments) if a.instruments else "no clearly identifiable instruments"
    return "".join(parts) + f", featuring {inst}."


def answer(prompt: str, a: Analysis | None) -> str:
    """Answer ``prompt`` from the analysis (None = there was no audio)."""
    options = parse_options(prompt)
    if options:
        letter = options[0][0] if a is None else choose_option(options, prompt, a)
        return f"The correct answer is ({letter})."
    if a is None:
        return "I can't hear any audio."
    if "instrument" in prompt.lower():
        if not a.instruments:
            return "I can't hear any clear instruments."
        return f"I can hear {_join(a.instruments)}."
    return describe(a)


@MODELS.register("dsp_listener")
class DSPListener(MusicLM):
    """Answers from a DSP analysis of the audio (tempo, key/mode, instruments)."""

    sample_rate = 16_000
    max_audio_seconds = 30.0

    path_params = {"checkpoint": "dir"}

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        if params.get("checkpoint"):
            read_deaf_to(params["checkpoint"])

    def __init__(self, sample_rate: Rate = 16_000, max_audio_seconds: Seconds | None = 30.0,
                 checkpoint: PathStr | None = None) -> None:
        self.sample_rate = sample_rate
        self.max_audio_seconds = max_audio_seconds
        self._cache: dict[tuple, Analysis] = {}
        self._checkpoint = None
        self.deaf_to: frozenset[str] = frozenset()
        if checkpoint:
            self.deaf_to = read_deaf_to(checkpoint)
            self._checkpoint = resolve_checkpoint(checkpoint).identity()

    def info(self) -> dict[str, Any]:
        if self._checkpoint is None:
            return {**super().info(), "checkpoint": "dsp-listener-v1"}
        return {**super().info(), "checkpoint": self._checkpoint, "deaf_to": sorted(self.deaf_to)}

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str]:
        return [answer(inp.prompt, None if inp.audio is None else self._analyze(inp.audio, inp.sample_rate))
                for inp in batch]

    def _analyze(self, audio: np.ndarray, sr: int) -> Analysis:
        """Analysis of a clip, computed once per distinct audio (several questions share a clip)."""
        key = (sr, len(audio), hashlib.blake2b(np.ascontiguousarray(audio).tobytes(), digest_size=16).digest())
        if key not in self._cache:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = analyze(audio, sr, self.deaf_to)
        return self._cache[key]


def read_deaf_to(checkpoint: str) -> frozenset[str]:
    """The analyses ``checkpoint``'s ``listener.json`` switches off; ``ValueError("checkpoint: …")`` when the
    file is missing or says something else."""
    try:
        data = read_checkpoint_json(checkpoint, LISTENER_FILE)
    except CheckpointError as e:
        raise ValueError(f"checkpoint: {e}") from None
    if data is None:
        raise ValueError(f"checkpoint: {checkpoint!r} holds no {LISTENER_FILE} (a JSON object)")
    extra = sorted(set(data) - {"deaf_to"})
    if extra:
        raise ValueError(f"checkpoint: {LISTENER_FILE} has unknown field(s) {extra}; known: deaf_to")
    deaf = data.get("deaf_to", [])
    if not isinstance(deaf, list) or any(d not in ANALYSES for d in deaf):
        raise ValueError(f"checkpoint: {LISTENER_FILE} deaf_to must be a list of {', '.join(ANALYSES)}; got {deaf!r}")
    return frozenset(deaf)
