"""LLM judge layer: OpenAI-compatible client, shared rate budget, response cache, prompt templates."""

from evalcore.llm.budget import Lease, RayBudget, TokenBucketBudget
from evalcore.llm.cache import RequestLog, ResponseCache, cache_key
from evalcore.llm.client import Completion, EndpointConfig, LLMClient
from evalcore.llm.prompts import TEMPLATES, PromptTemplate

__all__ = [
    "Completion", "EndpointConfig", "LLMClient", "Lease", "RayBudget", "TokenBucketBudget",
    "RequestLog", "ResponseCache", "cache_key", "TEMPLATES", "PromptTemplate",
]
