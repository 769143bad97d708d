"""A procedurally synthesised music benchmark with exact ground truth.

Every clip is rendered from a :class:`ClipSpec` (tempo, key, mode, instruments,
seed) by small numpy synthesisers, so the true answer to every question is known
and the whole benchmark is bit-reproducible from one seed. Used by the offline
embedded demo; no downloads, no model weights.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, replace
from typing import Annotated, Any, Callable, Iterator, Literal

import numpy as np
import soundfile as sf
from pydantic import BeforeValidator

from evalcore import storage
from evalcore.datasets.base import Dataset, DatasetContext, FactualVocabulary
from evalcore.params import Count, NonNegative, PathStr, Rate, Seconds
from evalcore.registry import DATASETS

INSTRUMENTS = ("guitar", "drums", "bass", "organ", "flute")
NOTE_NAMES = ("C", "C#", "D", "D#", "E", "F", "F#", "G", "G#", "A", "A#", "B")
MODES = ("major", "minor")
SCALES = {"major": (0, 2, 4, 5, 7, 9, 11), "minor": (0, 2, 3, 5, 7, 8, 10)}
# chord-root scale degrees, one chord per two beats; tonic-heavy so the mode is clear
PROGRESSIONS = ((0, 3, 0, 4), (0, 4, 0, 3), (0, 3, 4, 0))
BEATS_PER_CHORD = 2
TEMPO_RANGE = (60.0, 160.0)

MODE_OPTIONS = (
    "A bright major key",
    "A dark minor key",
    "No tonal centre (atonal)",
    "It alternates between major and minor",
)
TEMPO_OPTIONS = (
    "Slow (around 70 BPM)",
    "Moderate (around 100 BPM)",
    "Fast (around 130 BPM)",
    "Very fast (around 160 BPM)",
)
TEMPO_BUCKETS = (70.0, 100.0, 130.0, 160.0)
# instruments never synthesised, used as extra MCQ distractors
ABSENT_INSTRUMENTS = ("piano", "violin", "trumpet", "saxophone", "harp")
BAD_KINDS = ("missing", "corrupt", "truncated", "nan")


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


# ---------------------------------------------------------------- specs


def make_specs(n_clips: int, seconds: float, seed: int, prefix: str = "clip") -> list[ClipSpec]:
    """``n_clips`` clip specs: 1–3 instruments each (balanced usage), tempo 60–160, random key/mode."""
    rng = np.random.default_rng([seed, 0x5EED])
    usage = {name: 0 for name in INSTRUMENTS}
    specs = []
    for i in range(n_clips):
        k = 1 + i % 3
        jitter = rng.random(len(INSTRUMENTS))
        ranked = sorted(INSTRUMENTS, key=lambda s: (usage[s] + jitter[INSTRUMENTS.index(s)] * 1.5))
        chosen = tuple(sorted(ranked[:k], key=INSTRUMENTS.index))
        for name in chosen:
            usage[name] += 1
        specs.append(
            ClipSpec(
                clip_id=f"{prefix}{i:04d}",
                tempo_bpm=float(round(rng.uniform(*TEMPO_RANGE), 1)),
                key=NOTE_NAMES[int(rng.integers(12))],
                mode=MODES[int(rng.integers(2))],
                instruments=chosen,
                seconds=float(seconds),
                seed=int(rng.integers(2**31 - 1)),
            )
        )
    order = rng.permutation(n_clips)  # decouple the number of instruments from the index
    return [replace(specs[j], clip_id=f"{prefix}{i:04d}") for i, j in enumerate(order)]


# ---------------------------------------------------------------- questions


def _join(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " and " + words[-1]


def is_tonal(spec: ClipSpec) -> bool:
    """Whether the clip has pitched content (a drums-only clip has no audible key or mode)."""
    return any(name != "drums" for name in spec.instruments)


def caption(spec: ClipSpec) -> str:
    """The ground-truth description (phrased differently from the DSP listener's)."""
    feel = "an unhurried" if spec.tempo_bpm < 90 else "a lively" if spec.tempo_bpm > 125 else "a steady"
    where = f"in the key of {spec.key} {spec.mode}" if is_tonal(spec) else "with no pitched harmony"
    return (
        f"This is {feel} instrumental at {spec.tempo_bpm:g} beats per minute, {where}, "
        f"performed on {_join(sorted(spec.instruments))}."
    )


def mode_answer(spec: ClipSpec) -> int:
    """Index into MODE_OPTIONS of the audible tonality (atonal for drums only)."""
    return MODES.index(spec.mode) if is_tonal(spec) else 2


def tempo_bucket(tempo_bpm: float) -> int:
    """Index of the TEMPO_OPTIONS bucket nearest to ``tempo_bpm``."""
    return int(np.argmin([abs(tempo_bpm - c) for c in TEMPO_BUCKETS]))


def _instrument_mcq(spec: ClipSpec) -> tuple[list[str], int]:
    rng = np.random.default_rng([spec.seed, 7])
    correct = spec.instruments[int(rng.integers(len(spec.instruments)))]
    pool = [s for s in INSTRUMENTS if s not in spec.instruments]
    pool += list(ABSENT_INSTRUMENTS[: max(0, 3 - len(pool))])
    distractors = [pool[j] for j in rng.choice(len(pool), 3, replace=False)]
    options = [correct, *distractors]
    order = rng.permutation(4)
    options = [options[j] for j in order]
    return options, options.index(correct)


def clip_items(spec: ClipSpec, uri: str, metadata: dict[str, Any]) -> list[dict]:
    """The five item rows asked about one clip."""
    base = {
        "audio_uri": uri,
        "excerpt_start": 0.0,
        "excerpt_end": None,
        "difficulty": None,
        "metadata": json.dumps(metadata, sort_keys=True),
    }

    def item(protocol: str, task: str, question: str, **fields: Any) -> dict:
        return {
            **base,
            "item_id": f"{spec.clip_id}-{protocol}-{task}",
            "protocol": protocol,
            "task": task,
            "category": task,
            "question": question,
            **fields,
        }

    inst_options, inst_correct = _instrument_mcq(spec)
    instruments = sorted(spec.instruments)
    return [
        item("freeform", "caption", "Describe this piece of music.", reference=caption(spec)),
        item(
            "factual",
            "instrument",
            "What instruments are playing in this piece?",
            labels=instruments,
            reference=f"The instruments are {_join(instruments)}.",
        ),
        item(
            "mcq",
            "mode",
            "What is the tonality of this piece?",
            options=list(MODE_OPTIONS),
            correct_option=mode_answer(spec),
        ),
        item(
            "mcq",
            "tempo",
            "What is the tempo of this piece?",
            options=list(TEMPO_OPTIONS),
            correct_option=tempo_bucket(spec.tempo_bpm),
        ),
        item(
            "mcq",
            "instrument_mcq",
            "Which of these instruments can be heard?",
            options=inst_options,
            correct_option=inst_correct,
        ),
    ]


# ---------------------------------------------------------------- files


def encode(audio: np.ndarray, sample_rate: int, fmt: str = "wav", subtype: str | None = None) -> bytes:
    """Audio → encoded file bytes (in memory)."""
    buf = io.BytesIO()
    sf.write(buf, audio, sample_rate, format=fmt.upper(), subtype=subtype)
    return buf.getvalue()


def bad_clip_bytes(kind: str, sample_rate: int, seed: int) -> bytes | None:
    """The bytes of a deliberately broken clip of ``kind`` (None = no file at all)."""
    rng = np.random.default_rng([seed, BAD_KINDS.index(kind)])
    if kind == "missing":
        return None
    if kind == "corrupt":
        return rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    if kind == "truncated":
        tone = 0.5 * np.sin(2 * np.pi * 440.0 * np.arange(2 * sample_rate) / sample_rate)
        data = encode(tone.astype(np.float32), sample_rate, "wav", "PCM_16")
        return data[: len(data) // 2]
    if kind == "nan":
        audio = (0.1 * rng.standard_normal(sample_rate)).astype(np.float32)
        audio[::7] = np.nan
        return encode(audio, sample_rate, "wav", "FLOAT")
    raise ValueError(f"unknown bad clip kind {kind!r}")


def _write_if_changed(uri: str, data: bytes) -> None:
    if storage.exists(uri):
        try:
            if storage.read_bytes(uri) == data:
                return
        except OSError:
            pass
    storage.write_bytes(uri, data)


def _lower(v: Any) -> Any:
    """A string in lower case (``format: FLAC`` is ``flac``); other values as they are, for the schema to refuse."""
    return v.lower() if isinstance(v, str) else v


@DATASETS.register("synthetic")
class SyntheticBenchmark(Dataset):
    """Synthetic clips with exact tempo/key/mode/instrument ground truth (offline demo data)."""

    @classmethod
    def factual_vocabulary(cls, params: dict[str, Any]) -> FactualVocabulary:
        """Instrument labels among guitar, drums, bass, organ and flute: the general instrument lexicon."""
        return FactualVocabulary(tasks={"instrument": "instrument"})

    def __init__(
        self,
        n_clips: Count = 48,
        seconds: Seconds = 8.0,
        sample_rate: Rate = 22050,
        seed: int = 0,
        audio_dir: PathStr | None = None,
        bad_clips: NonNegative = 0,
        format: Annotated[Literal["wav", "flac"], BeforeValidator(_lower)] = "wav",
    ) -> None:
        if format.lower() not in ("wav", "flac"):
            raise ValueError(f"format must be 'wav' or 'flac', not {format!r}")
        self.n_clips = n_clips
        self.seconds = seconds
        self.sample_rate = sample_rate
        self.seed = seed
        self.audio_dir = audio_dir
        self.bad_clips = bad_clips
        self.format = format.lower()

    def specs(self) -> list[ClipSpec]:
        return make_specs(self.n_clips, self.seconds, self.seed)

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any]]:
        root = self.audio_dir or storage.join(ctx.run_root, "demo_audio")
        for spec in self.specs():
            uri = storage.join(root, f"{spec.clip_id}.{self.format}")
            audio = synthesize_clip(spec, self.sample_rate)
            _write_if_changed(uri, encode(audio, self.sample_rate, self.format))
            meta = {
                "tempo_bpm": spec.tempo_bpm,
                "key": spec.key,
                "mode": spec.mode,
                "instruments": sorted(spec.instruments),
                "tonal": is_tonal(spec),
            }
            yield from clip_items(spec, uri, meta)
        bad_specs = make_specs(self.bad_clips, self.seconds, self.seed + 1, prefix="bad")
        for j, spec in enumerate(bad_specs):
            kind = BAD_KINDS[j % len(BAD_KINDS)]
            uri = storage.join(root, f"{spec.clip_id}_{kind}.wav")
            data = bad_clip_bytes(kind, self.sample_rate, self.seed + j)
            if data is not None:
                _write_if_changed(uri, data)
            yield from clip_items(spec, uri, {"bad": kind})
