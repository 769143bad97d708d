"""Name → class registries: one per component package, each loading its own package's modules on first use.

A component is one module in its package plus one ``@REGISTRY.register("name")`` line on its class; the config
refers to it by that name, and the name is written nowhere else (the decorator sets the class's ``name``). The
five registries live in their packages, beside the interface their components implement:

* ``DATASETS`` in :mod:`evalcore.datasets.base` (:class:`~evalcore.datasets.base.Dataset`),
* ``MODELS`` in :mod:`evalcore.models.base` (:class:`~evalcore.models.base.MusicLM`),
* ``JUDGES`` in :mod:`evalcore.judges.base` (the :class:`~evalcore.judges.base.Judge` protocol),
* ``METRICS`` in :mod:`evalcore.textmetrics.freeform_metric`
  (:class:`~evalcore.textmetrics.freeform_metric.FreeformMetric`; it loads ``evalcore/textmetrics/registered/``, a
  package of metric modules only, beside the interface),
* ``RULES`` in :mod:`evalcore.mir_rules.rules` (:class:`~evalcore.mir_rules.rules.Rule`: CMI-Bench's released
  rules, loading ``evalcore/mir_rules/``; each registered under the task family it scores, a name of
  :class:`evalcore.datasets.cmi_bench.Family`, which the items carry as their ``category``).

The first read of a registry (``get``, ``names``, ``in``) imports every module of its package once, so every
registration has run (a module whose name starts with ``_`` is left out: the toys, ``_toy_*.py``, examples that
only their tests import, so they never appear among the known kinds): no ``__init__`` lists its package's modules and no module elsewhere imports a component by
a string. That import stays inside the package that owns the registry, so it adds no arrow between packages
(docs/layers.md). This module imports nothing of evalcore: the component packages import it, it imports none of
them.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """The components of one package by name (``kind``: what one is called in messages, e.g. "judge")."""

    def __init__(self, kind: str, package: str) -> None:
        self.kind = kind
        self.package = package
        self._factories: dict[str, Callable[..., T]] = {}
        self._lock = threading.RLock()
        self._loaded = self._loading = False

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator registering ``factory`` under ``name``; a class gets ``name`` as its ``name`` attribute."""

        def deco(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories and self._factories[name] is not factory:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            if isinstance(factory, type):
                own = factory.__dict__.get("name")
                if own is not None and own != name:
                    raise ValueError(f"{self.kind} {name!r}: the class says name = {own!r}; the registration is "
                                     "the only place to write it")
                factory.name = name  # type: ignore[attr-defined]
            self._factories[name] = factory
            return factory

        return deco

    def _load(self) -> None:
        """Import every module of the package once (their ``register`` lines run). Another thread waits until
        that is done; a module that reads the registry while it is being imported sees the registrations so far."""
        if self._loaded:
            return
        with self._lock:  # re-entrant: the loading thread passes (an import below may read the registry)
            if self._loaded or self._loading:
                return
            self._loading = True
            try:
                package = sys.modules[self.package]  # imported: the module holding this registry imports it
                for info in pkgutil.iter_modules(package.__path__):
                    if info.name.startswith("_"):  # private: the toys, examples imported by their tests only
                        continue
                    # dynamic: a module of the package that owns this registry (an import inside that package)
                    importlib.import_module(f"{self.package}.{info.name}")
                self._loaded = True
            finally:
                self._loading = False

    def names(self) -> list[str]:
        self._load()
        return sorted(self._factories)

    def __contains__(self, name: str) -> bool:
        self._load()
        return name in self._factories

    def get(self, name: str) -> Callable[..., T]:
        self._load()
        try:
            return self._factories[name]
        except KeyError:
            raise KeyError(
                f"unknown {self.kind} {name!r}; known: {', '.join(self.names()) or '(none)'}"
            ) from None

    def build(self, name: str, **params: Any) -> T:
        return self.get(name)(**params)
