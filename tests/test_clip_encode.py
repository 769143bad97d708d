"""The item browser's clip encoder takes audio of any length on a worker thread: libsndfile's Vorbis writer handed
hours of samples in one call overflows the thread's stack (a segfault that took a whole run down), so
:func:`evalcore.pipeline.clips.encode` writes in blocks. Run in a child process so a crash fails the test."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
import soundfile as sf

from evalcore.pipeline import clips

CHILD = """
import threading, numpy as np
from evalcore.pipeline import clips
out = {}
t = threading.Thread(target=lambda: out.update(n=len(clips.encode(np.zeros(3 * 3600 * 16000, np.float32), 16000))))
t.start(); t.join()
print(out["n"])
"""


def test_three_hours_encode_on_a_thread_without_crashing() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) > 0


def test_a_block_encoded_clip_decodes_to_its_samples() -> None:
    x = (0.3 * np.sin(np.arange(3 * clips.BLOCK + 123) * 0.05)).astype(np.float32)
    y, sr = sf.read(io.BytesIO(clips.encode(x, 16000)), dtype="float32")
    assert sr == 16000 and abs(len(y) - len(x)) < 2048  # a lossy codec may pad its last block
    n = min(len(x), len(y))
    assert np.corrcoef(x[:n], y[:n])[0, 1] > 0.95
