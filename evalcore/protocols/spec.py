"""What the request expansion reads of a run's config, as structural types: the fields of the config's sections it
uses, by name. The run config (:mod:`evalcore.runconfig.config`) sits above the components it checks, this package
among them, so the protocols name its sections by their shape, never by an import; its classes have these fields.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from evalcore.kinds.base import ProtocolKind


class ModelSpec(Protocol):
    """A configured model, as the expansion reads it (``ModelConfig``)."""

    name: str


class ProtocolSpec(Protocol):
    """A configured protocol instance, as the expansion reads it (``ProtocolConfig``)."""

    name: str
    kind: str
    conditions: Sequence[str]
    datasets: Sequence[str] | None
    models: Sequence[str] | None
    variants: dict[str, str] | None
    templates: str | dict[str, str] | None
    vocabulary: str | Sequence[str] | None
    option_orders: int
    icl_pool: str

    @property
    def kind_spec(self) -> type[ProtocolKind]: ...

    def icl_counts(self) -> list[int]: ...

    def icl_variant(self, base: str, k: int) -> str: ...


class SeedsSpec(Protocol):
    """The run's seeds the expansion draws with (``Seeds``)."""

    derangement: int
    icl: int
    noise: int
    options: int


class CaptionsSpec(Protocol):
    """Where the caption condition's descriptions come from (``CaptionsConfig``)."""

    run: str
    model: str
    protocol: str | None
    variant: str | None


class RunSpec(Protocol):
    """A run config, as the expansion reads it (``RunConfig``)."""

    models: Sequence[ModelSpec]
    protocols: Sequence[ProtocolSpec]
    seeds: SeedsSpec
    captions: CaptionsSpec | None
