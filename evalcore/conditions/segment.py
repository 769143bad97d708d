"""Segments: part of the item's clip, the rest cut — ``first_<p>``, ``middle_<p>``, ``last_<p>`` (the first, middle
or last ``p`` % of the excerpt) and ``window_<w>s`` (a window of ``w`` seconds at a seeded place, one place per clip
shared by every model and question; the whole excerpt when it is shorter).

The rest is **cut**, not silenced: the model hears a shorter clip, as a long-audio benchmark truncates one. A clip
padded with silence would carry its original length and a long silence the model may never have met in training,
so a drop in its score could come from the silence rather than from the music it lost. The cut is made on the
decoded excerpt at the model's sample rate, before the model's window chunks it. A segment keeps at least one sample.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import numpy as np

from evalcore.conditions.base import CONDITIONS, Condition
from evalcore.core.seeding import rng

_PERCENT = re.compile(r"^(\d{1,2}(\.\d+)?)$")
_SECONDS = re.compile(r"^(\d+(\.\d+)?)s$")


class Fraction(Condition):
    """A fixed share of the excerpt at one place (the family's ``position``)."""

    parametric = True
    parameter_form = "<percent>"
    where: ClassVar[str]

    def __init__(self, written: str, fraction: float) -> None:
        super().__init__(written)
        self.fraction = fraction

    @classmethod
    def parse(cls, parameter: str) -> Condition:
        m = _PERCENT.match(parameter)
        fraction = float(m.group(1)) / 100 if m else math.nan
        if not 0 < fraction < 1:
            raise ValueError(f"condition {cls.name}_{parameter}: the share kept is a percentage above 0 and below "
                             f"100, e.g. {cls.name}_25")
        return cls(f"{cls.name}_{parameter}", fraction)

    def kept(self) -> float | None:
        return self.fraction

    def position(self) -> str | None:
        return self.name

    def audio(self, x: np.ndarray, sample_rate: int, seed: int | None) -> np.ndarray:
        n = max(1, int(round(self.fraction * len(x))))
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
class Window(Condition):
    """``w`` seconds of the excerpt at a seeded place."""

    parametric = True
    parameter_form = "<seconds>s"
    seed_stream = "window"

    def __init__(self, written: str, seconds: float) -> None:
        super().__init__(written)
        self.seconds = seconds

    @classmethod
    def parse(cls, parameter: str) -> Condition:
        m = _SECONDS.match(parameter)
        seconds = float(m.group(1)) if m else math.nan
        if not seconds > 0:
            raise ValueError(f"condition window_{parameter}: the window is a length in seconds above 0, e.g. "
                             "window_2s")
        return cls(f"window_{parameter}", seconds)

    def kept(self) -> float | None:
        return None  # a share that depends on each clip's length: not a point of the fraction curve

    def position(self) -> str | None:
        return "window"

    def audio(self, x: np.ndarray, sample_rate: int, seed: int | None) -> np.ndarray:
        n = min(len(x), max(1, int(round(self.seconds * sample_rate))))
        start = int(rng("window", int(seed or 0)).integers(0, len(x) - n + 1))
        return x[start:start + n]

    def clip_variant(self, seed: Any) -> tuple[str, int | None]:
        return (self.written, None if seed is None or seed != seed else int(seed))
