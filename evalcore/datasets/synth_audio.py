"""The synthetic benchmark's audio: a :class:`ClipSpec` (tempo, key, mode, instruments, seed) rendered by small
numpy synthesisers (a chord progression in the key, one voice per instrument), deterministic from its seed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

INSTRUMENTS = ("guitar", "drums", "bass", "organ", "flute")
NOTE_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
MODES = ("major", "minor")
SCALES = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 10)}
# chord-root scale degrees, one chord per two beats; tonic-heavy so the mode is clear
PROGRESSIONS = ((0, 3, 0, 4), (0, 4, 0, 3), (0, 3, 4, 0))
BEATS_PER_CHORD = 2
TEMPO_RANGE = (60.0, 160.0)


@dataclass(frozen=True)
class ClipSpec:
    """Everything that determines one synthetic clip."""

    clip_id: str
    tempo_bpm: float
    key: str  # root note name, e.g. "F#"
    mode: str  # "major" | "minor"
    instruments: tuple[str, ...]
    seconds: float
    seed: int


# ---------------------------------------------------------------- music theory


def _midi_to_hz(midi: float) -> float:
    return 440.0 * 2.0 ** ((midi - 69.0) / 12.0)


def _place(pc: int, low: int) -> int:
    """The MIDI note of pitch class ``pc`` in the octave starting at ``low``."""
    return low + (pc - low) % 12


@dataclass(frozen=True)
class _Timeline:
    """Beat grid and harmony of a clip (pitch classes are absolute, 0 = C)."""

    beat_s: float
    n_beats: int
    chords: tuple[tuple[int, int, int], ...]  # per beat: (root, third, fifth) pitch classes
    scale: tuple[int, ...]

    def onset(self, beat: float, sr: int) -> int:
        return int(round(beat * self.beat_s * sr))


def _timeline(spec: ClipSpec, rng: np.random.Generator) -> _Timeline:
    root = NOTE_NAMES.index(spec.key)
    steps = SCALES[spec.mode]
    scale = tuple((root + s) % 12 for s in steps)
    prog = PROGRESSIONS[int(rng.integers(len(PROGRESSIONS)))]
    beat_s = 60.0 / spec.tempo_bpm
    n_beats = int(np.ceil(spec.seconds / beat_s)) + 1
    chords = []
    for b in range(n_beats):
        d = prog[(b // BEATS_PER_CHORD) % len(prog)]
        chords.append((scale[d % 7], scale[(d + 2) % 7], scale[(d + 4) % 7]))
    return _Timeline(beat_s, n_beats, tuple(chords), scale)


# ---------------------------------------------------------------- signal helpers


def _envelope(n: int, sr: int, attack: float, release: float) -> np.ndarray:
    """A trapezoid envelope of ``n`` samples with linear attack and release."""
    env = np.ones(n)
    a = min(n, max(1, int(attack * sr)))
    r = min(n - a, max(1, int(release * sr)))
    env[:a] = np.linspace(0.0, 1.0, a, endpoint=False)
    if r > 0:
        env[n - r :] = np.linspace(1.0, 0.0, r)
    return env


def _partials(freq: np.ndarray | float, n: int, sr: int, amps: tuple[float, ...]) -> np.ndarray:
    """Sum of harmonics of a (possibly time-varying) fundamental ``freq``."""
    f = np.broadcast_to(np.asarray(freq, dtype=np.float64), (n,))
    phase = 2.0 * np.pi * np.cumsum(f) / sr
    out = np.zeros(n)
    for k, a in enumerate(amps, start=1):
        if k * f.max() < 0.45 * sr:
            out += a * np.sin(k * phase)
    return out


def _band_noise(rng: np.random.Generator, n: int, sr: int, lo: float, hi: float) -> np.ndarray:
    """White noise band-limited to [lo, hi] Hz via an FFT mask."""
    spec = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1.0 / sr)
    spec[(freqs < lo) | (freqs > min(hi, 0.48 * sr))] = 0.0
    out = np.fft.irfft(spec, n)
    return out / (np.abs(out).max() + 1e-12)


def _add(buf: np.ndarray, start: int, sig: np.ndarray) -> None:
    """Mix ``sig`` into ``buf`` at ``start``, clipping at the end."""
    if start >= len(buf):
        return
    end = min(len(buf), start + len(sig))
    buf[start:end] += sig[: end - start]


def karplus_strong(
    freq: float, n: int, sr: int, rng: np.random.Generator, t60: float = 0.45
) -> np.ndarray:
    """A plucked string: y[n] = x[n] + rho/2 (y[n-N] + y[n-N-1]), computed one period at a time."""
    period = max(2, int(round(sr / freq - 0.5)))
    rho = 10.0 ** (-3.0 / (t60 * freq))  # extra loss per period → the given T60
    excite = rng.uniform(-1.0, 1.0, period)
    width = max(2, int(round(5 * sr / 22050)))
    for _ in range(3):  # soften the pick (a finger, not a plectrum); same colour at any rate
        excite = np.convolve(excite, np.ones(width) / width, mode="same")
    excite -= excite.mean()
    n_blocks = int(np.ceil(n / period)) + 1
    y = np.zeros(n_blocks * period)
    y[:period] = excite
    for k in range(1, n_blocks):
        prev = y[(k - 1) * period : k * period]
        before = y[(k - 1) * period - 1] if k > 1 else 0.0
        shifted = np.concatenate(([before], prev[:-1]))
        y[k * period : (k + 1) * period] = 0.5 * rho * (prev + shifted)
    out = y[:n]
    fade = min(n, int(0.01 * sr))
    out[n - fade :] *= np.linspace(1.0, 0.0, fade)
    return out


# ---------------------------------------------------------------- instruments

Renderer = Callable[[_Timeline, int, int, np.random.Generator], np.ndarray]


def _guitar(tl: _Timeline, n: int, sr: int, rng: np.random.Generator) -> np.ndarray:
    """Plucked chord tones on every beat (arpeggio root–third–fifth, random octave)."""
    out = np.zeros(n)
    note_len = int(min(1.2, 2.5 * tl.beat_s) * sr)
    for b in range(tl.n_beats):
        chord = tl.chords[b]
        pc = chord[b % 3] if rng.random() < 0.8 else chord[int(rng.integers(3))]
        midi = _place(pc, 52) + (12 if rng.random() < 0.3 else 0)
        note = karplus_strong(_midi_to_hz(midi), note_len, sr, rng)
        _add(out, tl.onset(b, sr), note * rng.uniform(0.8, 1.0))
    return out


def _drums(tl: _Timeline, n: int, sr: int, rng: np.random.Generator) -> np.ndarray:
    """Kick on beats 1 and 3, snare on 2 and 4, hi-hat on every eighth note."""
    out = np.zeros(n)
    kick_n, snare_n, hat_n = int(0.25 * sr), int(0.18 * sr), int(0.08 * sr)
    t_k, t_s, t_h = (np.arange(m) / sr for m in (kick_n, snare_n, hat_n))
    kick_f0 = rng.uniform(50.0, 60.0)
    kick = _partials(kick_f0 * (1.0 + np.exp(-t_k / 0.015)), kick_n, sr, (1.0,))
    kick *= np.exp(-t_k / 0.06)
    for b in range(tl.n_beats):
        start = tl.onset(b, sr)
        if b % 2 == 0:
            _add(out, start, kick)
        else:
            snare = _band_noise(rng, snare_n, sr, 1000.0, 5000.0) * np.exp(-t_s / 0.05)
            _add(out, start, 0.6 * snare)
        for half, gain in ((0.0, 0.5), (0.5, 0.3)):
            hat = _band_noise(rng, hat_n, sr, 6000.0, 11000.0) * np.exp(-t_h / 0.02)
            _add(out, tl.onset(b + half, sr), gain * hat)
    return out


def _bass(tl: _Timeline, n: int, sr: int, rng: np.random.Generator) -> np.ndarray:
    """Sustained low notes, one per beat: root, fifth, root, third of the chord."""
    out = np.zeros(n)
    pattern = (0, 2, 0, 1)  # index into (root, third, fifth)
    note_len = int((tl.beat_s + 0.03) * sr)
    env = _envelope(note_len, sr, 0.015, 0.03) * np.linspace(1.0, 0.8, note_len)
    for b in range(tl.n_beats):
        chord = tl.chords[b]
        root = _place(chord[0], 28)
        pc = chord[pattern[b % 4]]
        midi = root + (pc - chord[0]) % 12
        tone = _partials(_midi_to_hz(midi), note_len, sr, (1.0, 0.25, 0.08))
        _add(out, tl.onset(b, sr), tone * env)
    return out


def _organ(tl: _Timeline, n: int, sr: int, rng: np.random.Generator) -> np.ndarray:
    """A sustained additive pad playing the chord's triad (root in C3–B3)."""
    out = np.zeros(n)
    seg_len = int((BEATS_PER_CHORD * tl.beat_s + 0.05) * sr)
    t = np.arange(seg_len) / sr
    beat_phase = (t % tl.beat_s) / tl.beat_s
    accent = 1.0 - 0.25 * np.exp(-beat_phase / 0.08) * (t >= tl.beat_s)  # re-articulate each beat
    env = _envelope(seg_len, sr, 0.05, 0.05) * accent
    for b in range(0, tl.n_beats, BEATS_PER_CHORD):
        root_pc, third_pc, fifth_pc = tl.chords[b]
        root = _place(root_pc, 48)
        chord = np.zeros(seg_len)
        for pc in (root_pc, third_pc, fifth_pc):
            midi = root + (pc - root_pc) % 12
            chord += _partials(_midi_to_hz(midi), seg_len, sr, (1.0, 0.3, 0.12))
        _add(out, tl.onset(b, sr), chord * env)
    return out


def _flute(tl: _Timeline, n: int, sr: int, rng: np.random.Generator) -> np.ndarray:
    """A near-sinusoidal melody (C5–C#7) with vibrato and a little breath noise."""
    out = np.zeros(n)
    b, prev = 0, None
    while b < tl.n_beats:
        beats = 2 if (tl.beat_s > 0.6 and rng.random() < 0.3) else 1
        chord = tl.chords[b]
        pc = chord[int(rng.integers(3))] if rng.random() < 0.7 else tl.scale[int(rng.integers(7))]
        midi = _place(pc, 74)
        if prev is not None and midi - prev > 6 and midi - 12 >= 72:
            midi -= 12
        prev = midi
        m = int((beats * tl.beat_s + 0.04) * sr)
        t = np.arange(m) / sr
        f0 = _midi_to_hz(midi)
        freq = f0 * (1.0 + 0.008 * np.sin(2.0 * np.pi * 5.5 * t + rng.uniform(0, 2 * np.pi)))
        tone = _partials(freq, m, sr, (1.0, 0.12, 0.04))
        breath = 0.04 * _band_noise(rng, m, sr, 0.8 * f0, 2.5 * f0)
        _add(out, tl.onset(b, sr), (tone + breath) * _envelope(m, sr, 0.04, 0.04))
        b += beats
    return out


RENDERERS: dict[str, Renderer] = {
    "guitar": _guitar,
    "drums": _drums,
    "bass": _bass,
    "organ": _organ,
    "flute": _flute,
}


def synthesize_clip(spec: ClipSpec, sample_rate: int) -> np.ndarray:
    """Render ``spec`` to float32 mono audio peak-normalised to 0.8 (deterministic)."""
    rng = np.random.default_rng(spec.seed)
    tl = _timeline(spec, rng)
    n = int(round(spec.seconds * sample_rate))
    mix = np.zeros(n)
    for name in spec.instruments:
        stem = RENDERERS[name](tl, n, sample_rate, rng)
        rms = float(np.sqrt(np.mean(stem**2)))
        if rms > 0:
            mix += stem / rms * rng.uniform(0.85, 1.15)
    peak = float(np.abs(mix).max())
    if peak > 0:
        mix *= 0.8 / peak
    return mix.astype(np.float32)
