"""An LLM endpoint built from config params, as the judges and the rewrite systems use it.

:class:`LLMRunner` holds only its constructor params (the key's *variable name*, never the
key), builds its :class:`~evalcore.llm.client.LLMClient` lazily where it runs (a Ray worker
rebuilds it after unpickling) and answers a list of requests either online (a thread pool
over the shared rate budget) or through the OpenAI Batch API (``api="batch"``: submit,
poll, collect; resumable, see :mod:`evalcore.llm.batch`), always through the same
content-addressed cache. One :class:`~evalcore.llm.client.Completion` per request, in
order; a failed item is a Completion with ``error`` set, never an exception.

Defaults: ``cache_root`` the param, else ``$EVALCORE_LLM_CACHE``, else
``./.evalcore-llm-cache``; the request/response log goes to ``<log_root>/llm-log/``
(``log_root`` defaults to the cache root); ``budget`` names a shared
:class:`~evalcore.llm.budget.RayBudget` actor (else an in-process budget).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel

from evalcore.core import storage
from evalcore.llm.actors import complete_many
from evalcore.llm.batch import run_batch
from evalcore.llm.budget import endpoint_budget
from evalcore.llm.cache import RequestLog, ResponseCache
from evalcore.llm.client import Completion, EndpointConfig, LLMClient
from evalcore.core.params import Count, NonEmpty, NonNegative, PathStr, Seconds

DEFAULT_CACHE_ROOT = "./.evalcore-llm-cache"
CACHE_ENV = "EVALCORE_LLM_CACHE"
API_MODES = ("online", "batch")


def default_cache_root() -> str:
    """``$EVALCORE_LLM_CACHE`` or ``./.evalcore-llm-cache`` (local paths made absolute)."""
    root = os.environ.get(CACHE_ENV) or DEFAULT_CACHE_ROOT
    return root if storage.is_s3(root) else os.path.abspath(os.path.expanduser(root))


class LLMRunner:
    """One endpoint + cache + budget + log; ``run`` answers requests online or in batch mode."""

    #: where ``**endpoint`` goes (the params schema of the components built on a runner: evalcore.core.params)
    params_extend = (EndpointConfig,)

    def __init__(
        self,
        base_url: NonEmpty,
        model: NonEmpty,
        rpm: Count,
        tpm: Count,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: Seconds = 60.0,
        max_retries: NonNegative = 5,
        cache_root: PathStr | None = None,
        budget: str | None = None,
        threads: Count = 8,
        log_root: PathStr | None = None,
        api: Literal["online", "batch"] = "online",
        batch_poll_s: Seconds = 30.0,
        batch_timeout_s: Seconds = 24 * 3600.0,
        log_name: str = "llm",
        **endpoint: Any,
    ) -> None:
        if api not in API_MODES:
            raise ValueError(f"api must be one of {', '.join(API_MODES)}, not {api!r}")
        if batch_poll_s <= 0 or batch_timeout_s <= 0:
            raise ValueError("batch_poll_s and batch_timeout_s must be > 0")
        self.cache_root = cache_root or default_cache_root()
        self.config = EndpointConfig(base_url=base_url, model=model, rpm=rpm, tpm=tpm, api_key_env=api_key_env,
                                     timeout_s=timeout_s, max_retries=max_retries, **endpoint)
        self.budget_name = budget
        self.threads = max(1, int(threads))
        self.log_root = log_root or self.cache_root
        self.api = api
        self.batch_poll_s = float(batch_poll_s)
        self.batch_timeout_s = float(batch_timeout_s)
        self.log_name = log_name
        self.params = dict(base_url=base_url, model=model, rpm=rpm, tpm=tpm, api_key_env=api_key_env,
                           timeout_s=timeout_s, max_retries=max_retries, cache_root=self.cache_root, budget=budget,
                           threads=threads, log_root=log_root, api=api, batch_poll_s=batch_poll_s,
                           batch_timeout_s=batch_timeout_s, log_name=log_name, **endpoint)
        self._client: LLMClient | None = None

    def shared_budget(self) -> dict[str, Any] | None:
        """``{name, rpm, tpm}`` of the named Ray budget this runner shares, if any."""
        return {"name": self.budget_name, "rpm": self.config.rpm, "tpm": self.config.tpm} if self.budget_name else None

    def __getstate__(self) -> dict[str, Any]:
        return {"params": self.params}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["params"])  # type: ignore[misc]

    @property
    def client(self) -> LLMClient:
        if self._client is None:
            cfg = self.config
            log = RequestLog.for_run(self.log_root, self.log_name)
            self._client = LLMClient(cfg, endpoint_budget(self.budget_name, cfg.rpm, cfg.tpm),
                                     cache=ResponseCache(self.cache_root), log=log)
        return self._client

    def run(self, requests: list[list[dict]], template_version: str = "",
            schema: type[BaseModel] | None = None) -> list[Completion]:
        """One Completion per request (messages), in order; ``schema``: structured output."""
        if not requests:
            return []
        client = self.client
        try:
            if self.api == "batch":
                reqs: list[Any] = [{"messages": m, "template_version": template_version, "schema": schema}
                                   for m in requests]
                return run_batch(client, reqs, poll_interval_s=self.batch_poll_s, timeout_s=self.batch_timeout_s,
                                 metadata={"evalcore": self.log_name})
            return complete_many(client, requests, self.threads, template_version, schema=schema)
        finally:
            if client.log is not None:
                client.log.flush()  # s3:// logs are written in parts; local logs are already on disk
