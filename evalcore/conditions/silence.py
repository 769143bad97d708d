"""``silence``: zeros as long as the item's own excerpt."""

from __future__ import annotations

from typing import Any

import numpy as np

from evalcore.conditions.base import CONDITIONS, Condition
from evalcore.core import audio


@CONDITIONS.register("silence")
class Silence(Condition):
    """Digital silence of the clip's length."""

    control = True

    def kept(self) -> float | None:
        return 0.0

    def audio(self, x: np.ndarray, sample_rate: int, seed: int | None) -> np.ndarray:
        return audio.silence_like(len(x))

    def clip_variant(self, seed: Any) -> tuple[str, int | None]:
        return (self.written, None)
