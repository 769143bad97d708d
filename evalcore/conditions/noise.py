"""``noise``: seeded Gaussian noise (RMS 0.1) as long as the item's own excerpt, one draw per clip shared by every
model and question, so all compare on the same input."""

from __future__ import annotations

from typing import Any

import numpy as np

from evalcore.conditions.base import CONDITIONS, Condition
from evalcore.core import audio


@CONDITIONS.register("noise")
class Noise(Condition):
    """Gaussian noise of the clip's length."""

    control = True
    seed_stream = "noise"

    def kept(self) -> float | None:
        return None  # noise, not a share of the clip

    def audio(self, x: np.ndarray, sample_rate: int, seed: int | None) -> np.ndarray:
        return audio.noise_like(len(x), int(seed or 0))

    def clip_variant(self, seed: Any) -> tuple[str, int | None]:
        return (self.written, None if seed is None or seed != seed else int(seed))
