"""The clips of the item browser: each request's audio as its model heard it, rebuilt from the committed request by
the decode stage's own code (:class:`evalcore.pipeline.stages.Decoder`: fetch, decode the excerpt, mono, resample to
the model's rate, silence or seeded noise in place of the clip, the chunks the model was given) and written once per
distinct sound as a compressed file under ``browser/clips/``.

* **Which audio**: what the committed request carried — its ``audio_uri`` and excerpt (the random partner's for the
  ``random`` condition), its ``seed`` (noise) — at the sample rate and window the run read from the model
  (:func:`evalcore.pipeline.resources.audio_spec`, ``chunk_window``, ``long_audio``). The chunks are joined in
  order: with ``long_audio: truncate`` the clip is the first window only, and a last piece the decode stage dropped
  is not in it. ``text_only`` requests and models that read no audio have no clip; a request that never reached the
  decode stage (an ``expand`` error) has none either; a file that no longer decodes gets the decode stage's reason.
* **Once per sound**: a clip is named by a hash of its samples and rate, so the same excerpt heard by two models at
  one rate, a random partner's clip and that partner's own, or every silence of one length are one file; a file
  already written (an earlier ``evalcore browse``) is not written again.
* **The format**: Ogg Vorbis through libsndfile (``soundfile``), about 4–5 kB per second at 16 kHz; WAV (16-bit
  PCM) where the libsndfile at hand has no Vorbis encoder. Encoding costs about 3 ms of CPU per second of audio at
  16 kHz (the demo's 97 clips of 8 s: 2.3 s); the distinct clips are decoded and encoded on a few threads
  (libsndfile and soxr release the GIL).
* **A copied run**: an ``audio_uri`` under the run's original root (the demo's synthesized clips) is read under the
  root the run lives at now.
"""

from __future__ import annotations

import hashlib
import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import soundfile as sf

from evalcore.conditions.base import condition
from evalcore.core import storage
from evalcore.pipeline.stages import Decoder

#: the requests' columns the clips are rebuilt from
SOURCE = ["model", "condition", "audio_uri", "excerpt_start", "excerpt_end", "seed", "error_stage"]
NO_CLIP_STAGES = frozenset({"expand", "load", "pipeline"})  # the request never reached the decode stage
WORKERS = 4
BLOCK = 1 << 16  # frames per write (see encode)


@dataclass(frozen=True)
class Spec:
    """How a model's decode stage prepared its audio."""

    sample_rate: int
    window_s: float | None
    long_audio: str = "chunk"
    uses_audio: bool = True

    def line(self) -> str:
        """What the model hears, for the page: ``16 kHz mono, windows of 30 s``."""
        if not self.uses_audio:
            return "reads no audio"
        text = f"hears {self.sample_rate / 1000:g} kHz mono"
        if self.window_s is not None:
            text += f", {'the first window of' if self.long_audio == 'truncate' else 'windows of'} {self.window_s:g} s"
        return text


def _encoding() -> tuple[str, str, str]:
    if "VORBIS" in sf.available_subtypes("OGG"):
        return "OGG", "VORBIS", ".ogg"
    return "WAV", "PCM_16", ".wav"  # a libsndfile built without Vorbis


FORMAT, SUBTYPE, SUFFIX = _encoding()


def encode(x: np.ndarray, sample_rate: int) -> bytes:
    """``x`` (mono float32) as an Ogg Vorbis file (WAV where Vorbis is missing), written in blocks of
    :data:`BLOCK` frames: libsndfile's Vorbis writer handed hours of audio at once overflows a thread's stack."""
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", sample_rate, 1, format=FORMAT, subtype=SUBTYPE) as f:
        for i in range(0, len(x), BLOCK):
            f.write(x[i:i + BLOCK])
    return buf.getvalue()


def clip_name(x: np.ndarray, sample_rate: int) -> str:
    """The file name of a sound: a hash of its rate and samples."""
    h = hashlib.sha1(str(sample_rate).encode())
    h.update(np.ascontiguousarray(x, dtype=np.float32).tobytes())
    return h.hexdigest()[:20] + SUFFIX


def listed(uri: str) -> list[str]:
    """The files under ``uri``; none where it does not exist (an S3 prefix can list as a directory just deleted)."""
    try:
        return storage.list_files(uri)
    except FileNotFoundError:
        return []


def rebase(uri: Any, old_root: str | None, new_root: str) -> Any:
    """``uri`` under ``old_root`` moved under ``new_root`` (a copied run's own audio); other URIs as they are."""
    if not isinstance(uri, str) or not old_root:
        return uri
    old, new = old_root.rstrip("/"), new_root.rstrip("/")
    if old == new or not (uri == old or uri.startswith(old + "/")):
        return uri
    return new + uri[len(old):]


def _variant(written: str, seed: Any) -> tuple:
    return condition(written).clip_variant(seed)


class _Writer:
    """Rebuilds the clips of one source excerpt for one model spec (all its conditions) and writes new ones."""

    def __init__(self, clips_dir: str, out: storage.RunStorage, existing: set[str]) -> None:
        self.clips_dir, self.out, self.existing = clips_dir, out, existing

    def __call__(self, task: tuple) -> dict[tuple, tuple[str | None, str | None, float | None]]:
        rate, window, long_audio, uri, start, end, variants = task
        spec = Spec(rate, window, long_audio)
        decoder = Decoder(spec.sample_rate, spec.window_s, spec.long_audio, spec.uses_audio)
        cache: dict = {}
        got = {}
        for kind, seed in variants:
            row = {"condition": "correct" if kind == "audio" else kind, "audio_uri": uri, "excerpt_start": start,
                   "excerpt_end": end, "seed": seed, "error": None}
            pieces = decoder.one(row, cache)
            if pieces[0].get("error") is not None:
                got[(kind, seed)] = (None, pieces[0]["error"], None)
                continue
            x = np.concatenate([p["audio"] for p in pieces]) if len(pieces) > 1 else pieces[0]["audio"]
            name = clip_name(x, spec.sample_rate)
            if name not in self.existing:
                self.out.write_bytes(storage.join(self.clips_dir, name), encode(x, spec.sample_rate))
                self.existing.add(name)
            got[(kind, seed)] = (name, None, len(x) / spec.sample_rate)
        return got


def rebuild(requests: pd.DataFrame, specs: dict[str, Spec | str], root: str, old_root: str | None = None,
            out: storage.RunStorage | None = None, workers: int = WORKERS) -> pd.DataFrame:
    """Per request (``requests``' index): ``clip`` (file name under ``browser/clips/``), ``clip_note`` (why there
    is none, or what it is) and ``seconds``. ``specs``: model → its :class:`Spec`, or the reason it is unknown."""
    out = out or storage.RunStorage(root)
    clips_dir = storage.join(root, "browser", "clips")
    existing = {u.rsplit("/", 1)[-1] for u in listed(clips_dir)}
    cols = [requests[c].tolist() for c in SOURCE]
    cols[2] = [rebase(u, old_root, root) for u in cols[2]]
    note: list[str | None] = [None] * len(requests)
    tasks: dict[tuple, set] = {}
    keys: dict[int, tuple] = {}
    for i, (m, cond, uri, start, end, seed, stage) in enumerate(zip(*cols)):
        spec = specs.get(m)
        if not condition(cond).hears:
            note[i] = f"no audio ({cond.replace('_', ' ')})"
        elif isinstance(spec, str) or spec is None:
            note[i] = f"no clip: {spec or 'the model is not in the run config'}"
        elif not spec.uses_audio:
            note[i] = "the model reads no audio"
        elif stage in NO_CLIP_STAGES or not isinstance(uri, str):
            note[i] = "no audio was played (the request was never decoded)"
        else:
            start = None if start is None or start != start else float(start)
            end = None if end is None or end != end else float(end)
            source = (spec.sample_rate, spec.window_s, spec.long_audio, uri, start, end)  # plain: cheap to hash
            tasks.setdefault(source, set()).add(_variant(cond, seed))
            keys[i] = (source, _variant(cond, seed))
    writer = _Writer(clips_dir, out, existing)
    todo = [(*source, sorted(v, key=str)) for source, v in tasks.items()]
    with ThreadPoolExecutor(max_workers=max(1, min(workers, os.cpu_count() or 1, len(todo) or 1))) as pool:
        done = dict(zip(tasks, pool.map(storage.carried(writer), todo)))  # the run's S3 settings
    clip: list[str | None] = [None] * len(requests)
    seconds = np.full(len(requests), np.nan)
    for i, (source, variant) in keys.items():
        name, why, secs = done[source][variant]
        clip[i] = name
        if secs is not None:
            seconds[i] = secs
        if why is not None:
            note[i] = f"no clip: {why}"
    return pd.DataFrame({"clip": clip, "clip_note": note, "seconds": seconds}, index=requests.index)
