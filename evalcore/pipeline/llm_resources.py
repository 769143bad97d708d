"""Run-level resources of the LLM-backed judges and models: cache, request log and shared budgets.

A judge or model class with ``llm_backed = True`` (the LLM judges, the reference rewrites, the
OpenAI-compatible audio endpoint) takes ``cache_root``, ``log_root`` and ``budget`` params.

* **Cache and log.** Inside a run they default to the run's own root, so the cache sits under
  ``<run>/llm-cache/`` (a resumed run finds it there) and every run writes its request/response log
  to ``<run>/llm-log/``. A configured ``cache_root`` — or ``$EVALCORE_LLM_CACHE`` set for the run —
  shares the cache across runs; the log still goes with the run unless ``log_root`` is configured
  too. The defaults are decided once, in the driver, and passed as explicit params: a Ray worker's
  working directory is not the run's.
* **Budgets.** A named ``budget`` is one Ray actor shared by every worker of the run. A Ray actor
  lives while its creator holds it, and a handle found by name does not keep it alive, so the driver
  creates each named budget before the workers start and holds it until the run ends
  (:func:`hold_budgets`); the workers then find it by name.
* **Single flight.** Every LLM-backed judge and model of a run gets ``flights``: the name of one
  :class:`~evalcore.llm.flights.RayFlights` actor of this run attempt, held by the driver like the
  budgets, so identical requests in flight at the same time on any worker make one call.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from evalcore.runconfig.config import JudgeConfig, ModelConfig, RunConfig
from evalcore.judges.base import JUDGES
from evalcore.llm.budget import endpoint_budget
from evalcore.llm.flights import RayFlights
from evalcore.llm.runner import CACHE_ENV
from evalcore.models.base import MODELS
from evalcore.core.registry import Registry

__all__ = ["with_run_llm_roots", "hold_budgets"]


def _llm_backed(registry: Registry, kind: str) -> bool:
    return bool(getattr(registry.get(kind), "llm_backed", False))


def _defaults(registry: Registry, kind: str, params: dict[str, Any], root: str, flights: str) -> dict[str, Any]:
    if not _llm_backed(registry, kind):
        return params
    out = dict(params)
    if out.get("cache_root") is None and not os.environ.get(CACHE_ENV):
        out["cache_root"] = root
    if out.get("log_root") is None:
        out["log_root"] = root
    out.setdefault("flights", flights)
    return out


def _judge(judge: JudgeConfig | None, root: str, flights: str) -> JudgeConfig | None:
    if judge is None:
        return None
    return judge.model_copy(update={"params": _defaults(JUDGES, judge.kind, judge.params, root, flights)})


def _model(model: ModelConfig, root: str, flights: str) -> ModelConfig:
    return model.model_copy(update={"params": _defaults(MODELS, model.kind, model.params, root, flights)})


def with_run_llm_roots(cfg: RunConfig) -> RunConfig:
    """``cfg`` with the cache and log of every LLM-backed judge and model defaulted to the run's root, and
    this run attempt's single-flight actor named in their params."""
    flights = f"evalcore-flights-{uuid.uuid4().hex[:16]}"
    protocols = [p.model_copy(update={"judge": _judge(p.judge, cfg.root, flights),
                                      "agreement_judge": _judge(p.agreement_judge, cfg.root, flights)})
                 for p in cfg.protocols]
    return cfg.model_copy(update={"protocols": protocols,
                                  "models": [_model(m, cfg.root, flights) for m in cfg.models]})


def hold_budgets(cfg: RunConfig) -> list[Any]:
    """Create (in this process, on the running Ray) every named budget and the single-flight actor of the
    run's LLM-backed judges and models; keep the returned handles until the run ends."""
    parts: list[tuple[Registry, str, dict[str, Any]]] = [(MODELS, m.kind, m.params) for m in cfg.models]
    parts += [(JUDGES, j.kind, j.params) for p in cfg.protocols for j in (p.judge, p.agreement_judge) if j]
    held: dict[str, Any] = {}
    for registry, kind, params in parts:
        if not _llm_backed(registry, kind):
            continue
        if params.get("flights") and params["flights"] not in held:
            held[params["flights"]] = RayFlights(params["flights"]).open()
        if not params.get("budget"):
            continue
        spec = registry.build(kind, **params).shared_budget()  # building one is cheap: no client yet
        if spec and spec["name"] not in held:
            held[spec["name"]] = endpoint_budget(**spec)
    return list(held.values())
