"""Audio in containers libsndfile cannot read — MP4 / M4A (AAC: DSing's released vocals) — decoded by PyAV, whose
wheels bundle FFmpeg. :func:`evalcore.core.audio.decode` hands such bytes here; nothing is decoded by hand.

Behaviour worth knowing: FFmpeg applies the MP4 edit list, so the AAC encoder's priming samples are dropped and
sample 0 is the recording's first sample; the whole stream is decoded and the excerpt cut from it (DSing's files
are a few minutes of one voice). A stream FFmpeg cannot open or decode is ``"corrupt"``; one whose decoded length
falls short of the length its header promises by more than one AAC frame is ``"truncated"``.
"""

from __future__ import annotations

import io

import numpy as np

__all__ = ["is_container", "decode_container"]

_FRAME = 2048  # two AAC frames of slack between the promised and the decoded length


def is_container(data: bytes) -> bool:
    """Whether ``data`` is an ISO base media file (MP4, M4A: an ``ftyp`` box first)."""
    return len(data) >= 12 and data[4:8] == b"ftyp"


def decode_container(data: bytes) -> tuple[np.ndarray, int]:
    """(mono float32 samples, native sample rate) of the first audio stream; raises ``ValueError`` with a reason
    (``corrupt: …`` / ``truncated: …``) where FFmpeg cannot give the whole stream."""
    import av  # heavy: FFmpeg's libraries load on first use

    try:
        with av.open(io.BytesIO(data)) as container:
            if not container.streams.audio:
                raise ValueError("corrupt: no audio stream in the container")
            stream = container.streams.audio[0]
            resampler = av.AudioResampler(format="fltp")  # planar float, channels and rate unchanged
            parts = [p.to_ndarray() for frame in container.decode(stream) for p in resampler.resample(frame)]
            rate = int(stream.codec_context.sample_rate or stream.rate or 0)
            promised = (int(stream.duration * stream.time_base * rate)
                        if stream.duration and stream.time_base else None)
    except av.error.FFmpegError as e:
        raise ValueError(f"corrupt: FFmpeg cannot decode the container ({type(e).__name__})") from e
    if not parts or rate <= 0:
        raise ValueError("corrupt: no decodable audio in the container")
    x = np.concatenate(parts, axis=1).mean(axis=0).astype(np.float32)
    if promised is not None and len(x) + _FRAME < promised:
        raise ValueError(f"truncated: the stream promises {promised} samples, {len(x)} decode")
    return x, rate
