"""Audio input: fetch → decode (only the excerpt) → mono → resample → chunk.

Everything returned is a 1-D ``float32`` array. Every bad input raises :class:`AudioError`
with a short ``reason`` tag so the pipeline can count failures by kind.

Behaviour worth knowing (libsndfile 1.2 via ``soundfile``):

* **Excerpts** are read by seeking, so only frames ``[round(start*sr), round(end*sr))`` are
  decoded. ``end`` past the end of the file is clipped to the file end; ``start`` at or past
  the end, ``start < 0`` or ``start >= end`` is ``"bad_excerpt"``; an excerpt that rounds to
  zero frames is ``"empty"``.
* **Truncated WAV**: libsndfile does not complain; it silently shrinks the frame count to
  the bytes present. We parse the RIFF header ourselves and compare the ``data`` chunk size
  with what libsndfile found (plain RIFF/WAVE only; streaming sizes 0 / 0xFFFFFFFF and
  RF64/W64 are not checked).
* **Truncated MP3**: the frame count comes from the Xing/LAME header and the decoder just
  stops early, so a short read is detected when the excerpt reaches into the missing part.
  (MP3s without a Xing header get an estimated length from libsndfile; for VBR files that
  estimate can be wrong and libsndfile then returns a shortened signal -- undetectable here.)
* **Truncated FLAC**: STREAMINFO keeps the true length; libFLAC fails ("lost sync") once it
  runs out of bytes, even when the cut falls on a frame boundary. That cannot be told apart
  from damage inside the stream, so it is reported as ``"corrupt"`` (the message says it
  may be truncated). Excerpts wholly inside the surviving part still decode.
* **Edges**: only regular files are read (a FIFO, device, socket or directory is ``"unreadable"``
  before any open, :func:`evalcore.core.storage.read_bytes`), within the read deadline (``"timeout"``,
  class ``transient``; an unreachable or overloaded store is ``"unreachable"``, also transient). A
  sample rate outside ``MIN_RATE..MAX_RATE`` is ``"bad_rate"``; excerpt times beyond
  ``schema.MAX_EXCERPT_SECONDS`` are ``"bad_excerpt"``; audio with 0 samples after any step (excerpt,
  mono, resample) is ``"empty"``; a finite float sample too large for float32 (a DOUBLE WAV holding
  1e300), or samples that overflow while mixing or resampling, is ``"out_of_range"`` (NaN and inf
  in the file stay ``"non_finite"``).
* **MP4 / M4A** (AAC; DSing's vocals): libsndfile cannot read them; :mod:`evalcore.core.audio_av` decodes the whole
  stream with PyAV (FFmpeg) and the excerpt is cut from it by the same rules; a stream FFmpeg cannot decode is
  ``"corrupt"``, one shorter than its header promises ``"truncated"``.
* **MP3 seeking**: after a seek mpg123 lands on a frame boundary without the Layer III bit
  reservoir, so the first frames after the seek decode wrongly. We seek ``_MP3_PREROLL``
  frames earlier and drop them, which makes excerpts match a full decode sample for sample.
"""

from __future__ import annotations

import io
import math

import numpy as np
import soundfile as sf
import soxr

from evalcore.core import audio_av, storage
from evalcore.core.errors import INPUT, TRANSIENT
from evalcore.core.schema import MAX_EXCERPT_SECONDS

# Enough to refill the Layer III bit reservoir at the lowest bitrates (measured need ≤ ~8k).
_MP3_PREROLL = 16384
_FLOAT_SUBTYPES = frozenset({"FLOAT", "DOUBLE"})
#: sample rates a recording may have (Hz): below or above is a broken header, not audio
MIN_RATE, MAX_RATE = 1_000, 768_000
_FLOAT32_MAX = float(np.finfo(np.float32).max)
# libsndfile's open errors speak of files; evalcore decodes bytes in memory, where they mislead
_SNDFILE_CAUSES = {"File does not exist or is not a regular file (possibly a pipe?).":
                   "damaged data: no decodable audio stream after the header"}


class AudioError(Exception):
    """A bad audio input; ``reason`` is a short machine-friendly tag, str(e) the human message.

    Reasons: ``missing``, ``unreadable`` (permission/IO, not a regular file), ``corrupt``, ``truncated``,
    ``empty``, ``non_finite``, ``out_of_range``, ``bad_rate``, ``bad_excerpt`` (class ``input``), and
    ``timeout``, ``unreachable`` (class ``transient``: the file may be fine, the store was not).
    """

    def __init__(self, reason: str, message: str, error_class: str = INPUT):
        super().__init__(message)
        self.reason = reason
        self.error_class = error_class

    def __reduce__(self):  # picklable across Ray workers
        return (type(self), (self.reason, str(self), self.error_class))


# --------------------------------------------------------------------------- fetch


def fetch(uri: str) -> bytes:
    """The raw bytes at a local path or ``s3://`` URI."""
    try:
        return storage.read_bytes(uri)
    except FileNotFoundError as e:
        raise AudioError("missing", f"audio file not found: {uri}") from e
    except storage.ReadTimeout as e:
        raise AudioError("timeout", f"{e}", TRANSIENT) from e
    except OSError as e:  # PermissionError, not a regular file, network/S3 errors
        if storage.is_transient(e):
            tag = "timeout" if "Timeout was reached" in str(e) else "unreachable"  # the S3 client's own timeout
            raise AudioError(tag, f"cannot read audio {uri}: {e}", TRANSIENT) from e
        raise AudioError("unreadable", f"cannot read audio {uri}: {e}") from e


# --------------------------------------------------------------------------- decode


def _wav_promised_frames(data: bytes) -> int | None:
    """Frames the RIFF/WAVE ``data`` chunk header promises, or None if not a plain RIFF WAV."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    pos, align, end = 12, 0, len(data)
    while pos + 8 <= end:
        cid = data[pos : pos + 4]
        size = int.from_bytes(data[pos + 4 : pos + 8], "little")
        if cid == b"fmt " and pos + 22 <= end:
            align = int.from_bytes(data[pos + 20 : pos + 22], "little")
        elif cid == b"data":
            if size in (0, 0xFFFFFFFF) or align <= 0:  # streamed / unknown size
                return None
            return size // align
        pos += 8 + size + (size & 1)
    return None


def _check_excerpt(start_s: float | None, end_s: float | None) -> None:
    for name, v in (("start", start_s), ("end", end_s)):
        if v is not None and not math.isfinite(v):
            raise AudioError("bad_excerpt", f"excerpt {name} is not finite: {v}")
        if v is not None and abs(v) > MAX_EXCERPT_SECONDS:
            raise AudioError("bad_excerpt", f"excerpt {name} {v:g} s is out of range (> {MAX_EXCERPT_SECONDS:g} s)")
    if start_s is not None and start_s < 0:
        raise AudioError("bad_excerpt", f"excerpt start {start_s}s < 0")
    if end_s is not None and end_s <= (start_s or 0.0):
        raise AudioError("bad_excerpt", f"excerpt start {start_s or 0.0}s >= end {end_s}s")


def decode(data: bytes, start_s: float | None = None, end_s: float | None = None) -> tuple[np.ndarray, int]:
    """Decode ``data`` → (mono float32 1-D array, native sample rate), reading only the excerpt.

    ``start_s``/``end_s`` are seconds (None = file start / end); ``end_s`` beyond the file is
    clipped to the file end. Multi-channel audio is averaged over channels.
    """
    _check_excerpt(start_s, end_s)
    if not data:
        raise AudioError("empty", "audio file is empty (0 bytes)")
    if audio_av.is_container(data):  # MP4 / M4A (AAC), which libsndfile cannot read: PyAV (FFmpeg)
        return _excerpt_of(*_container(data), start_s, end_s)
    try:
        f = sf.SoundFile(io.BytesIO(data))
    except (RuntimeError, ValueError, TypeError) as e:  # sf.LibsndfileError is a RuntimeError
        # libsndfile names the in-memory file ("Error opening <_io.BytesIO object at 0x…>: …"); keep the cause
        cause = str(getattr(e, "error_string", "") or e).split(">: ")[-1]
        raise AudioError("corrupt", f"cannot decode audio: {_SNDFILE_CAUSES.get(cause, cause)}") from e
    with f:
        sr, n, ch = f.samplerate, f.frames, f.channels
        _check_rate(sr)
        promised = _wav_promised_frames(data) if f.format in ("WAV", "WAVEX") else None
        if promised is not None and promised > n:
            raise AudioError("truncated", f"WAV truncated: header promises {promised} frames, file holds {n}")
        start, stop = _bounds(n, sr, start_s, end_s)
        want = stop - start

        pre = min(_MP3_PREROLL, start) if f.format == "MP3" else 0
        subtype = f.subtype
        # DOUBLE samples are read as float64, so a finite value beyond float32 is told from inf
        dtype = "float64" if subtype == "DOUBLE" else "float32"
        try:
            if start - pre:
                f.seek(start - pre)
            buf = f.read(want + pre, dtype=dtype, always_2d=False)
        except (RuntimeError, ValueError) as e:
            raise AudioError("corrupt", f"audio decode failed after the header (damaged or truncated): {e}") from e

    got = len(buf) - pre
    if got < want:
        raise AudioError("truncated", f"audio truncated: expected {want} frames, decoded {max(got, 0)}")
    if pre:
        buf = buf[pre:]
    if subtype in _FLOAT_SUBTYPES:
        if not np.isfinite(buf).all():
            raise AudioError("non_finite", "audio contains NaN or infinite samples")
        peak = float(np.abs(buf).max(initial=0.0))
        if peak > _FLOAT32_MAX:
            raise AudioError("out_of_range", f"audio has a sample of magnitude {peak:.3g}, beyond float32")
    # channel mean as a mat-vec product: ~10x faster than buf.mean(axis=1) on (frames, ch) data
    x = buf if ch == 1 else buf @ np.full(ch, 1.0 / ch, dtype=buf.dtype)
    return x.astype(np.float32, copy=False), sr


def _container(data: bytes) -> tuple[np.ndarray, int]:
    try:
        x, sr = audio_av.decode_container(data)
    except ValueError as e:
        reason, _, text = str(e).partition(": ")
        raise AudioError(reason if reason in ("corrupt", "truncated") else "corrupt", text or str(e)) from e
    _check_rate(sr)
    if not np.isfinite(x).all():
        raise AudioError("non_finite", "audio contains NaN or infinite samples")
    return x, sr


def _check_rate(sr: int) -> None:
    if not MIN_RATE <= sr <= MAX_RATE:
        raise AudioError("bad_rate", f"sample rate {sr} Hz is outside {MIN_RATE}..{MAX_RATE} Hz")


def _bounds(n: int, sr: int, start_s: float | None, end_s: float | None) -> tuple[int, int]:
    """The excerpt's frames ``[start, stop)`` of ``n`` at ``sr`` (``end_s`` past the end clipped to it)."""
    if n <= 0:
        raise AudioError("empty", "audio has 0 frames")
    start = 0 if start_s is None else int(round(start_s * sr))
    stop = n if end_s is None else min(int(round(end_s * sr)), n)
    if start >= n:
        raise AudioError("bad_excerpt", f"excerpt start {start_s}s is at/after the end of the audio ({n / sr:.3f}s)")
    if stop - start <= 0:
        raise AudioError("empty", f"excerpt [{start_s}, {end_s}) holds no frames at {sr} Hz")
    return start, stop


def _excerpt_of(x: np.ndarray, sr: int, start_s: float | None, end_s: float | None) -> tuple[np.ndarray, int]:
    """The excerpt of a fully decoded signal, by the rules :func:`decode` applies while seeking."""
    start, stop = _bounds(len(x), sr, start_s, end_s)
    return x[start:stop], sr


# --------------------------------------------------------------------------- resample / chunk


def resample(x: np.ndarray, sr: int, target_sr: int) -> np.ndarray:
    """Resample with soxr 'HQ'; returns ``x`` itself (as float32) when the rates are equal."""
    x = np.asarray(x, dtype=np.float32)
    if sr == target_sr:
        return x
    if sr <= 0 or target_sr <= 0:
        raise ValueError(f"sample rates must be positive, got {sr} → {target_sr}")
    if len(x) == 0:
        return x
    return np.asarray(soxr.resample(x, sr, target_sr, quality="HQ"), dtype=np.float32)


def chunk(x: np.ndarray, sr: int, window_s: float | None, min_last_s: float = 1.0) -> list[np.ndarray]:
    """Split into consecutive non-overlapping windows of ``window_s`` seconds (views, no copies).

    ``window_s`` None, or audio no longer than one window → ``[x]``. A last piece shorter
    than ``min_last_s`` is dropped when at least one full window precedes it (so the
    result is never empty for non-empty ``x``).
    """
    if window_s is None:
        return [x]
    win = int(round(window_s * sr))
    if win <= 0:
        raise ValueError(f"window_s must be positive, got {window_s}")
    n = len(x)
    if n <= win:
        return [x]
    pieces = [x[i : i + win] for i in range(0, n, win)]
    last = len(pieces[-1])
    if last < win and last < min_last_s * sr:
        pieces.pop()
    return pieces


# --------------------------------------------------------------------------- convenience


def load(uri: str, target_sr: int, start_s: float | None = None, end_s: float | None = None) -> np.ndarray:
    """fetch + decode (excerpt, mono) + resample to ``target_sr``."""
    data = fetch(uri)
    try:
        x, sr = decode(data, start_s, end_s)
        y = resample(x, sr, target_sr)
        if len(y) == 0:
            raise AudioError("empty", f"{len(x)} samples at {sr} Hz give 0 samples at {target_sr} Hz")
        if not np.isfinite(y).all():
            raise AudioError("out_of_range", "samples overflow float32 when mixed to mono or resampled")
    except AudioError as e:
        raise AudioError(e.reason, f"{uri}: {e}", e.error_class) from e
    return y


def silence_like(n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.float32)


def noise_like(n: int, seed: int, rms: float = 0.1) -> np.ndarray:
    """Gaussian noise from ``seed`` (reproducible), scaled to exactly ``rms``."""
    x = np.random.default_rng(int(seed) % (1 << 64)).standard_normal(n, dtype=np.float32)
    if n:
        x *= np.float32(rms / math.sqrt(float(np.dot(x, x)) / n))
    return x
