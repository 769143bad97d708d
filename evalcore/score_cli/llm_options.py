"""The ``--llm-*`` options shared by the score commands that can use an LLM judge, and the judge builder."""

from __future__ import annotations

from typing import Any, Optional

import typer

from evalcore.judges.base import Judge, build_judge as registered_judge
from evalcore.score_cli.io import fail

BASE_URL: Optional[str] = typer.Option(None, "--llm-base-url", help="LLM judge: OpenAI-compatible endpoint URL.")
MODEL: Optional[str] = typer.Option(None, "--llm-model", help="LLM judge: model name.")
KEY_ENV: str = typer.Option("OPENAI_API_KEY", "--llm-key-env",
                            help="LLM judge: name of the environment variable holding the API key.")
CACHE: Optional[str] = typer.Option(None, "--llm-cache", metavar="DIR", help="LLM judge: response cache "
                                    "(default $EVALCORE_LLM_CACHE, else ./.evalcore-llm-cache).")
RPM: int = typer.Option(500, "--llm-rpm", help="LLM judge: requests per minute.")
TPM: int = typer.Option(200_000, "--llm-tpm", help="LLM judge: tokens per minute.")
MAX_RETRIES: int = typer.Option(5, "--llm-max-retries", help="LLM judge: retries per request before the row errors.")
TIMEOUT: float = typer.Option(60.0, "--llm-timeout", help="LLM judge: seconds per request.")


def build_judge(command: str, flag: str, kind: str, *, base_url: str | None, model: str | None, key_env: str,
                cache: str | None, rpm: int, tpm: int, max_retries: int, timeout_s: float, **params: Any) -> Judge:
    """The registered LLM judge ``kind`` for these options; a missing or bad option exits 2 naming it."""
    missing = [opt for opt, val in (("--llm-base-url", base_url), ("--llm-model", model)) if not val]
    if missing:
        fail(command, f"{flag} (the LLM judge layer) needs {' and '.join(missing)}")
    if rpm < 1 or tpm < 1 or max_retries < 0 or timeout_s <= 0:
        fail(command, "--llm-rpm/--llm-tpm must be at least 1, --llm-max-retries >= 0, --llm-timeout > 0")
    try:
        return registered_judge(kind, base_url=base_url, model=model, api_key_env=key_env, cache_root=cache, rpm=rpm,
                                tpm=tpm, max_retries=max_retries, timeout_s=timeout_s, **params)
    except ValueError as e:
        fail(command, f"{flag}: {e}")
