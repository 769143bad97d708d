"""Segments: part of the item's clip, the rest cut — ``first_<p>``, ``middle_<p>``, ``last_<p>`` (the first, middle
or last ``p`` % of the excerpt) and ``window_<w>s`` (a window of ``w`` seconds at a seeded place, one place per clip
shared by every model and question; the whole excerpt when it is shorter).

The rest is **cut**, not silenced: the model hears a shorter clip, as a long-audio benchmark truncates one. A clip
padded with silence would carry its original length and a long silence the model may never have met in training,
so a drop in its score could come from the silence rather than from the music it lost. The cut is made on the
decoded excerpt at the model's sample rate, before the model's window chunks it. A segment keeps at least one sample.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from evalcore.conditions.base import CONDITIONS, Family
from evalcore.core.seeding import rng

_PERCENT = re.compile(r"^(\d{1,2}(\.\d+)?)$")
_SECONDS = re.compile(r"^(\d+(\.\d+)?)s$")


class Fraction(Family):
    """A fixed share of the excerpt (``value``) at one place (the family's name)."""

    parameter_form = "<percent>"
    parameter_rule = "the share kept is a percentage above 0 and below 100, e.g. {name}_25"

    @classmethod
    def read(cls, parameter: str) -> float | None:
        m = _PERCENT.match(parameter)
        return float(m.group(1)) / 100 if m and 0 < float(m.group(1)) < 100 else None

    def kept(self) -> float | None:
        return self.value

    def position(self) -> str | None:
        return self.name

    def audio(self, x: np.ndarray, sample_rate: int, seed: int | None) -> np.ndarray:
        n = max(1, int(round(self.value * len(x))))
        start = {"first": 0, "middle": (len(x) - n) // 2, "last": len(x) - n}[self.name]
        return x[max(0, start):max(0, start) + n]

    def clip_variant(self, seed: Any) -> tuple[str, int | None]:
        return (self.written, None)


@CONDITIONS.register("first")
class First(Fraction):
    """The first ``p`` % of the excerpt."""


@CONDITIONS.register("middle")
class Middle(Fraction):
    """The ``p`` % of the excerpt around its middle."""


@CONDITIONS.register("last")
class Last(Fraction):
    """The last ``p`` % of the excerpt."""


@CONDITIONS.register("window")
class Window(Family):
    """``value`` seconds of the excerpt at a seeded place."""

    parameter_form = "<seconds>s"
    parameter_rule = "the window is a length in seconds above 0, e.g. window_2s"
    seed_stream = "window"

    @classmethod
    def read(cls, parameter: str) -> float | None:
        m = _SECONDS.match(parameter)
        return float(m.group(1)) if m and float(m.group(1)) > 0 else None

    def kept(self) -> float | None:
        return None  # a share that depends on each clip's length: not a point of the fraction curve

    def position(self) -> str | None:
        return "window"

    def audio(self, x: np.ndarray, sample_rate: int, seed: int | None) -> np.ndarray:
        n = min(len(x), max(1, int(round(self.value * sample_rate))))
        start = int(rng("window", int(seed or 0)).integers(0, len(x) - n + 1))
        return x[start:start + n]

    def clip_variant(self, seed: Any) -> tuple[str, int | None]:
        return (self.written, None if seed is None or seed != seed else int(seed))
