"""Structured output: the JSON schema of an answer, its ``response_format`` wire forms, and validation.

The wire formats, strongest first: ``json_schema`` (strict schema), ``json_object`` (any JSON object;
the prompt names the shape) and ``prompt`` (no ``response_format``: the prompt alone asks for JSON).
:class:`evalcore.llm.client.LLMClient` steps down through them where a server refuses one.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

#: wire formats of structured output, strongest first (``prompt`` = no ``response_format``)
STRUCTURED_FORMATS = ("json_schema", "json_object", "prompt")


def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a pydantic model (part of the cache key of a structured request)."""
    return model.model_json_schema()


def response_format(model: type[BaseModel], wire: str) -> dict[str, Any] | None:
    """The ``response_format`` request field for ``wire`` (None for ``prompt``)."""
    if wire == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": model.__name__, "schema": schema_of(model),
                                                       "strict": True}}
    return {"type": "json_object"} if wire == "json_object" else None


_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL | re.IGNORECASE)


def parse_json_output(text: str, model: type[BaseModel]) -> dict[str, Any]:
    """Validate ``text`` (a JSON object, optionally in a Markdown code fence) → the model's dict.

    Raises ``ValueError`` with a short reason when it is not valid JSON for ``model``.
    """
    m = _FENCE.match(text or "")
    body = m.group(1) if m else (text or "")
    try:
        return model.model_validate_json(body).model_dump(mode="json")
    except Exception as e:  # pydantic.ValidationError (bad JSON or wrong shape)
        first = e.errors()[0] if hasattr(e, "errors") else {"msg": str(e)}  # type: ignore[union-attr]
        where = ".".join(str(p) for p in first.get("loc", ())) or "(root)"
        raise ValueError(f"{where}: {first.get('msg')} in {body[:80]!r}") from None
