"""A procedurally synthesised music benchmark with exact ground truth.

Every clip is rendered from a :class:`ClipSpec` (tempo, key, mode, instruments,
seed) by small numpy synthesisers (:mod:`evalcore.datasets.synth_audio`), so the true answer
to every question is known and the whole benchmark is bit-reproducible from one seed. Used by the offline
embedded demo; no downloads, no model weights.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Annotated, Any, Iterator, Literal

import numpy as np
import soundfile as sf
from pydantic import BeforeValidator

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, Dataset, DatasetContext, FactualVocabulary
from evalcore.datasets.synth_audio import INSTRUMENTS, MODES, NOTE_NAMES, TEMPO_RANGE, ClipSpec, synthesize_clip
from evalcore.core.params import Count, NonNegative, PathStr, Rate, Seconds

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

    @classmethod
    def audio_home(cls, params: dict[str, Any], run_root: str) -> str:
        """Where its clips are written, from the params and the run root alone (``evalcore validate`` checks that
        every node of a cluster reaches it)."""
        return params.get("audio_dir") or storage.join(run_root, "demo_audio")

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any]]:
        root = self.audio_home({"audio_dir": self.audio_dir}, ctx.run_root)
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
