"""Where the LLM-backed judges and models of a run keep their response cache and request log.

A judge or model class with ``llm_backed = True`` (the LLM judges, the reference rewrites, the
OpenAI-compatible audio endpoint) takes ``cache_root`` and ``log_root`` params. Inside a run they
default to the run's own root, so the cache sits under ``<run>/llm-cache/`` (a resumed run finds it
there) and every run writes its request/response log to ``<run>/llm-log/``. A configured
``cache_root`` — or ``$EVALCORE_LLM_CACHE`` set for the run — shares the cache across runs; the log
still goes with the run unless ``log_root`` is configured too. The defaults are decided once, in the
driver, and passed as explicit params: a Ray worker's working directory is not the run's.
"""

from __future__ import annotations

import os
from typing import Any

from evalcore.config import JudgeConfig, ModelConfig, RunConfig
from evalcore.llm.runner import CACHE_ENV
from evalcore.registry import JUDGES, MODELS, Registry

__all__ = ["with_run_llm_roots"]


def _defaults(registry: Registry, kind: str, params: dict[str, Any], root: str) -> dict[str, Any]:
    if not getattr(registry.get(kind), "llm_backed", False):
        return params
    out = dict(params)
    if out.get("cache_root") is None and not os.environ.get(CACHE_ENV):
        out["cache_root"] = root
    if out.get("log_root") is None:
        out["log_root"] = root
    return out


def _judge(judge: JudgeConfig | None, root: str) -> JudgeConfig | None:
    if judge is None:
        return None
    return judge.model_copy(update={"params": _defaults(JUDGES, judge.kind, judge.params, root)})


def _model(model: ModelConfig, root: str) -> ModelConfig:
    return model.model_copy(update={"params": _defaults(MODELS, model.kind, model.params, root)})


def with_run_llm_roots(cfg: RunConfig) -> RunConfig:
    """``cfg`` with the cache and log of every LLM-backed judge and model defaulted to the run's root."""
    import evalcore.judges  # noqa: F401  (registers the judges)
    import evalcore.models  # noqa: F401  (registers the models)

    protocols = [p.model_copy(update={"judge": _judge(p.judge, cfg.root),
                                      "agreement_judge": _judge(p.agreement_judge, cfg.root)})
                 for p in cfg.protocols]
    return cfg.model_copy(update={"protocols": protocols, "models": [_model(m, cfg.root) for m in cfg.models]})
