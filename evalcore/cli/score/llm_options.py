"""The ``--llm-*`` options of the score commands that can use an LLM judge, declared once, and the judge they build.

A command takes them all with one parameter, ``llm: LlmOptions = LLM`` (:func:`~evalcore.cli.score.option_groups.
takes_groups`); a new option is one field here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from evalcore.judges.base import Judge, build_judge as registered_judge
from evalcore.cli.score.io import fail
from evalcore.cli.score.option_groups import OptionGroup, option


@dataclass(frozen=True)
class LlmOptions(OptionGroup):
    """The LLM judge's endpoint, model, key, cache and limits."""

    base_url: Optional[str] = option(None, "--llm-base-url", help="LLM judge: OpenAI-compatible endpoint URL.")
    model: Optional[str] = option(None, "--llm-model", help="LLM judge: model name.")
    key_env: str = option("OPENAI_API_KEY", "--llm-key-env",
                          help="LLM judge: name of the environment variable holding the API key.")
    cache: Optional[str] = option(None, "--llm-cache", metavar="DIR", help="LLM judge: response cache "
                                  "(default $EVALCORE_LLM_CACHE, else ./.evalcore-llm-cache).")
    rpm: int = option(500, "--llm-rpm", help="LLM judge: requests per minute.")
    tpm: int = option(200_000, "--llm-tpm", help="LLM judge: tokens per minute.")
    max_retries: int = option(5, "--llm-max-retries", help="LLM judge: retries per request before the row errors.")
    timeout: float = option(60.0, "--llm-timeout", help="LLM judge: seconds per request.")

    def judge(self, command: str, flag: str, kind: str, **params: Any) -> Judge:
        """The registered LLM judge ``kind`` for these options; a missing or bad option exits 2 naming it."""
        missing = [opt for opt, val in (("--llm-base-url", self.base_url), ("--llm-model", self.model)) if not val]
        if missing:
            fail(command, f"{flag} (the LLM judge layer) needs {' and '.join(missing)}")
        if self.rpm < 1 or self.tpm < 1 or self.max_retries < 0 or self.timeout <= 0:
            fail(command, "--llm-rpm/--llm-tpm must be at least 1, --llm-max-retries >= 0, --llm-timeout > 0")
        try:
            return registered_judge(kind, base_url=self.base_url, model=self.model, api_key_env=self.key_env,
                                    cache_root=self.cache, rpm=self.rpm, tpm=self.tpm, max_retries=self.max_retries,
                                    timeout_s=self.timeout, **params)
        except ValueError as e:
            fail(command, f"{flag}: {e}")


#: a command's default for its ``llm: LlmOptions`` parameter (the options come from the command line)
LLM = LlmOptions()
