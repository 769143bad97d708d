"""The audio-condition interface and its registry: what every package asks of a condition.

A condition says what a model hears in place of the item's own clip: the clip itself (``correct``), another
recording (``random``), zeros, seeded noise, nothing (``text_only``), or part of the clip (the segments). It is one
module in this package plus one ``@CONDITIONS.register("name")`` line. A family of conditions written with a
parameter (``first_25``: the first 25 % of the clip) registers its prefix and parses the rest
(:meth:`Condition.parse`). The request expansion asks a condition which audio a request plays
(:meth:`Condition.expand`), the decode stage what the model hears of it (:meth:`Condition.audio`), the item
browser which clip file stands for it (:meth:`Condition.clip_variant`), the listening verdict whether it is a
control and the listening curve how much of the clip it keeps. It sits on a low floor (docs/layers.md): it imports
nothing of evalcore but the floor (the registry, the audio helpers).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from evalcore.core.registry import Registry


@dataclass(frozen=True)
class Context:
    """What the request expansion knows of a request's item when a condition sets what the model is given."""

    #: the item whose recording the random condition plays (None: none, ``unpairable`` says why)
    partner: dict | None = None
    unpairable: str | None = None
    #: the clip's description: the item's ``caption``, else the captions run's answer for its clip (None: none)
    caption: str | None = None
    #: the item's paraphrases (``{"question", "options"}``, or ``{"error", "error_class"}`` where the paraphraser
    #: gave none), the first as ``paraphrase_1``; None: the run made none
    paraphrases: tuple[dict, ...] | None = None


class Condition:
    """One condition as written in a protocol's ``conditions``; the defaults describe the item's own clip."""

    name: ClassVar[str]  #: set by the registration (a family's prefix)
    #: the model is given audio (False: the request carries none and nothing is decoded)
    hears: ClassVar[bool] = True
    #: it takes the clip's information away (a random recording, silence, noise, no audio): the listening verdict
    #: reads the paired differences correct − control
    control: ClassVar[bool] = False
    #: it gives a description of the clip in its place (the item's ``caption``, else the config's ``captions`` run)
    described: ClassVar[bool] = False
    #: the index of the paraphrase of the question and options it asks (``paraphrase_<j>``: j), None: as written
    paraphrase: int | None = None
    #: the stream of the run's ``seeds.noise`` a per-clip seed is drawn from (None: no seed), shared by every model
    #: and question playing the clip
    seed_stream: ClassVar[str | None] = None
    #: a family written ``<name>_<parameter>`` (parsed by :meth:`parse`) rather than one fixed name
    parametric: ClassVar[bool] = False
    #: how a family's parameter is written, for messages (e.g. ``<percent>``)
    parameter_form: ClassVar[str] = ""
    #: its name as written in the config (a family member's with its parameter)
    written: str

    def __init__(self, written: str | None = None) -> None:
        self.written = written or self.name

    @classmethod
    def parse(cls, parameter: str) -> Condition:
        """The family member written ``<name>_<parameter>``; ``ValueError`` says what the parameter must be."""
        raise ValueError(f"condition {cls.name!r} takes no parameter")

    def kept(self) -> float | None:
        """The share of the item's clip the model hears, for the listening curve (1: all of it; 0: none of it);
        None: not a point of the curve (another recording, noise)."""
        return 1.0

    def position(self) -> str | None:
        """Which part of the clip it keeps (``first``, ``middle``, ``last``, ``window``): a listening curve per
        position; None for the whole clip or none of it (the curve's ends, shared by every position)."""
        return None

    def asked(self, item: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The item as this condition asks it (its question and options; default: as written)."""
        return item

    def expand(self, request: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The request with the audio (and, for a description, the prompt) this condition gives."""
        return request

    def audio(self, x: np.ndarray, sample_rate: int, seed: int | None) -> np.ndarray:
        """What the model hears of the decoded excerpt ``x`` (mono float32 at ``sample_rate``)."""
        return x

    def clip_variant(self, seed: Any) -> tuple[str, int | None]:
        """The key of the clip file the item browser plays for it: ``("audio", None)`` for the excerpt as
        decoded, else the written name and the seed that makes it."""
        return ("audio", None)


class Family(Condition):
    """A family of conditions written ``<name>_<parameter>`` (``first_25``): ``value`` is the parameter as read."""

    parametric = True
    #: what a parameter must be (``{name}``: the family's name), said when one is not
    parameter_rule: ClassVar[str] = ""

    def __init__(self, written: str, value: Any) -> None:
        super().__init__(written)
        self.value = value

    @classmethod
    def read(cls, parameter: str) -> Any | None:
        """The parameter's value, None when it is not one."""
        raise NotImplementedError

    @classmethod
    def parse(cls, parameter: str) -> Condition:
        value = cls.read(parameter)
        if value is None:
            raise ValueError(f"condition {cls.name}_{parameter}: {cls.parameter_rule.format(name=cls.name)}")
        return cls(f"{cls.name}_{parameter}", value)


CONDITIONS: Registry[type[Condition]] = Registry("condition", "evalcore.conditions")


@functools.lru_cache(maxsize=1024)
def condition(written: str) -> Condition:
    """The condition ``written`` in a config: a registered name, or ``<family>_<parameter>``; ``ValueError`` in one
    line naming the forms known. A condition holds no state, so each name is parsed once per process."""
    if written in CONDITIONS and not CONDITIONS.get(written).parametric:
        return CONDITIONS.get(written)(written)
    family, _, parameter = written.rpartition("_")
    if family and family in CONDITIONS and CONDITIONS.get(family).parametric:
        return CONDITIONS.get(family).parse(parameter) if parameter else _unknown(written)
    return _unknown(written)


def known(written: Any) -> Condition | None:
    """The condition a table names (``written``), or None for a name this evalcore does not know (a table written by
    another version): what the reports and the scoring stage ask of a condition read back from a table."""
    try:
        return condition(str(written))
    except ValueError:
        return None


def _unknown(written: str) -> Condition:
    fixed = [n for n in CONDITIONS.names() if not CONDITIONS.get(n).parametric]
    families = [f"{n}_{CONDITIONS.get(n).parameter_form}" for n in CONDITIONS.names() if CONDITIONS.get(n).parametric]
    raise ValueError(f"unknown condition {written!r}; known: {', '.join(fixed)}, or {', '.join(families)}")
