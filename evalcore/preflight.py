"""What can be checked of a parsed run config before any model runs, without loading weights.

``parse_config`` already checks every field, every component's ``params`` against the schema its
class declares (:mod:`evalcore.params`), vocabularies, prompt templates and placeholders. This adds
what lies outside the config: configured files and ``s3://`` objects exist, a checkpoint directory
holds a config its backend recognises, the free-form metrics' tools and model files are there.
``evalcore validate`` and ``evalcore run`` (before Ray starts) both call :func:`check`.
"""

from __future__ import annotations

from typing import Any, Iterator

from evalcore.config import ConfigError, RunConfig
from evalcore.params import path_problems


def _components(cfg: RunConfig) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(config path, registry package, kind, params) of every configured dataset, model and judge."""
    for i, d in enumerate(cfg.datasets):
        yield f"datasets.{i}.params", "datasets", d.kind, d.params
    for i, m in enumerate(cfg.models):
        yield f"models.{i}.params", "models", m.kind, m.params
    for i, p in enumerate(cfg.protocols):
        for field in ("judge", "agreement_judge"):
            j = getattr(p, field)
            if j is not None:
                yield f"protocols.{i}.{field}.params", "judges", j.kind, j.params


def problems(cfg: RunConfig, check_paths: bool = True, datasets: bool = True) -> list[str]:
    """One ``<field>: <reason>`` line per problem. ``check_paths=False`` skips everything that depends on this
    machine or store (files, ``s3://`` objects, checkpoints, the free-form metrics' WordNet, Java and model
    files); ``datasets=False`` leaves the datasets' files out (a resumed run reads its committed items)."""
    import importlib

    from evalcore import registry, storage
    from evalcore.metrics.freeform import preflight as metric_problems

    if not check_paths:
        return []
    out = [msg for i, p in enumerate(cfg.protocols) if p.kind == "freeform"
           for msg in metric_problems(p.freeform_metrics(), f"protocols.{i}.metrics")]

    storage.configure_s3(storage.S3Options(**cfg.storage.s3.model_dump()))
    for where, package, kind, params in _components(cfg):
        if package == "datasets" and not datasets:
            continue
        importlib.import_module(f"evalcore.{package}")
        cls = getattr(registry, package.upper()).get(kind)
        out += [f"{where}.{f}: {m}" if f else f"{where}: {m}" for f, m in path_problems(cls, params)]
    return out


def check(cfg: RunConfig, check_paths: bool = True, datasets: bool = True) -> None:
    """Raise :class:`ConfigError` listing every problem :func:`problems` finds."""
    found = problems(cfg, check_paths, datasets)
    if found:
        raise ConfigError("invalid run config:\n" + "\n".join(f"  {line}" for line in found))
