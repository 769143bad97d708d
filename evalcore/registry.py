"""Name → factory registries for datasets, models, judges and metrics.

A new component is one new module plus one ``@REGISTRY.register("name")`` line;
the config refers to it by that name.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of factories of one kind of component."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator registering ``factory`` under ``name``."""

        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories and self._factories[name] is not factory:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._factories[name] = factory
            return factory

        return deco

    def names(self) -> list[str]:
        return sorted(self._factories)

    def in_order(self) -> list[str]:
        """The names in the order they were registered."""
        return list(self._factories)

    def __contains__(self, name: str) -> bool:
        return name in self._factories

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._factories[name]
        except KeyError:
            raise KeyError(
                f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or '(none)'}"
            ) from None

    def build(self, name: str, **params: Any) -> T:
        return self.get(name)(**params)


DATASETS: Registry[Any] = Registry("dataset")
MODELS: Registry[Any] = Registry("model")
JUDGES: Registry[Any] = Registry("judge")
#: free-form metrics (evalcore.metrics.freeform_metric.FreeformMetric subclasses), by the name a config lists
METRICS: Registry[Any] = Registry("metric")
