"""An example adapter for ``isolated`` models (see :mod:`evalcore.models.isolated`).

It is weight-free and answers from the audio's length and loudness, but is shaped like a research
model's adapter: it imports its pinned dependencies (``requires``, module names that must import in
its runtime env), optionally reads a checkpoint directory, and reports the versions it got.
A MU-LLaMA adapter would do the same with ``requires=["llama", "torch"]``, build its model from
``checkpoint_dir`` in ``__init__`` and call the repository's inference function in ``generate``.
It imports nothing from evalcore: an adapter only needs numpy.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys

import numpy as np


class ExampleAdapter:
    """Reports its environment; answers "N.N s of audio at -XX dBFS" (or "no audio")."""

    def __init__(self, checkpoint_dir: str | None, sample_rate: int, requires: list[str] | None = None,
                 prefix: str = "") -> None:
        self.sample_rate = sample_rate
        self.prefix = prefix
        self.versions: dict[str, str] = {}
        for name in requires or []:
            try:
                mod = importlib.import_module(name)  # dynamic: a package the user's config says it requires
            except ImportError as e:
                raise ImportError(f"ExampleAdapter needs {name!r}, which does not import here "
                                  f"(sys.prefix={sys.prefix}); set the model's runtime_env") from e
            self.versions[name] = str(getattr(mod, "__version__", "unknown"))
        self.weights = None
        if checkpoint_dir is not None:  # a research model would load its weights here
            path = os.path.join(checkpoint_dir, "weights.npy")
            self.weights = hashlib.sha256(open(path, "rb").read()).hexdigest()[:12] if os.path.exists(path) else None

    def info(self) -> dict:
        return {"requires": self.versions, "weights": self.weights}

    def generate(self, audios: list[np.ndarray | None], prompts: list[str]) -> list[str]:
        out = []
        for audio, prompt in zip(audios, prompts):
            if audio is None:
                out.append(f"{self.prefix}no audio; question had {len(prompt.split())} words")
                continue
            x = np.asarray(audio, dtype=np.float64)
            if not np.all(np.isfinite(x)):
                raise ValueError("audio contains NaN or infinity")
            rms = float(np.sqrt(np.mean(x**2))) if x.size else 0.0
            out.append(f"{self.prefix}{x.size / self.sample_rate:.1f} s of audio at "
                       f"{20 * np.log10(max(rms, 1e-10)):.0f} dBFS")
        return out
