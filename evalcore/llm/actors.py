"""Run many chat requests through one :class:`LLMClient` with a thread pool, in-process or as a Ray actor.

``LLMWorker`` is a plain class; wrap it with ``ray.remote(num_cpus=0)(LLMWorker)`` to run
several workers that share one :class:`~evalcore.llm.budget.RayBudget`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from evalcore.llm.client import Completion, LLMClient


def complete_many(client: LLMClient, requests: list[list[dict]], threads: int = 8,
                  template_version: str = "", schema: type[BaseModel] | None = None,
                  **params: Any) -> list[Completion]:
    """One :class:`Completion` per request, in input order (never fewer: nothing is dropped).

    ``schema``: structured output validated against this pydantic model (``Completion.data``).
    """
    if not requests:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(requests)))) as pool:
        futures = [pool.submit(client.complete, m, template_version, schema=schema, **params) for m in requests]
        return [f.result() for f in futures]


class LLMWorker:
    """Holds one client; ``run`` returns completions as dicts (cheap to ship back from Ray)."""

    def __init__(self, client: LLMClient, threads: int = 8) -> None:
        self.client = client
        self.threads = threads

    def run(self, requests: list[list[dict]], template_version: str = "", **params: Any) -> list[dict]:
        return [c.to_dict() for c in complete_many(self.client, requests, self.threads, template_version, **params)]
