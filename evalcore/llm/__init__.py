"""LLM judge layer: OpenAI-compatible client (with structured output), shared rate budget, response cache,
prompt templates, Batch API mode and the config-built runner the judges and rewrite systems use."""

from evalcore.llm.budget import Lease, RayBudget, TokenBucketBudget
from evalcore.llm.cache import RequestLog, ResponseCache, cache_key
from evalcore.llm.client import Completion, EndpointConfig, LLMClient
from evalcore.llm.prompts import TEMPLATES, PromptTemplate
from evalcore.llm.runner import LLMRunner

__all__ = [
    "Completion", "EndpointConfig", "LLMClient", "Lease", "RayBudget", "TokenBucketBudget",
    "RequestLog", "ResponseCache", "cache_key", "TEMPLATES", "PromptTemplate", "LLMRunner",
]
