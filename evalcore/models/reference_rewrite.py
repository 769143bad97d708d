"""Reference-rewrite "systems" for free-form QA: the paraphrase skyline and the adversarial rewrite.

Not a Music LM: it ignores the audio and the prompt and rewrites each request's *reference*
answer through the LLM layer (``uses_audio = False``: the pipeline neither fetches nor decodes
its audio, so a missing or corrupt audio file is not an error for it, and conditions ``random``,
``silence`` and ``noise`` give it the same input as ``text_only``) ("Factual and musical metrics for Music LMs", §3.2–3.3, Table 2):

* ``mode: paraphrase`` — same meaning and musical facts, different wording (the skyline no
  Music LM should beat);
* ``mode: adversarial`` — minimal edits that change the musical facts (lexically close, wrong).

Calls go through :class:`~evalcore.llm.runner.LLMRunner` with the versioned ``paraphrase`` /
``adversarial`` templates (their tag is part of the cache key), temperature 0 and a fixed
seed, the response cache, the shared rate budget and the request log; ``api: batch`` uses the
OpenAI Batch API instead (``mode`` names the rewrite, so the API mode is ``api``). A request
without a reference, or whose call fails after its bounded retries, becomes an error row with
the reason (the pipeline turns a returned exception into that row); nothing is dropped.
"""

from __future__ import annotations

from typing import Any, Literal, Sequence

from evalcore.core.errors import INPUT
from evalcore.llm.prompts import ADVERSARIAL, PARAPHRASE, PromptTemplate
from evalcore.llm.runner import LLMRunner
from evalcore.models.base import MODELS, AudioPrompt, MusicLM
from evalcore.core.packages import CORE
from evalcore.core.params import Count, NonEmpty, PathStr, Rate, Seconds

TEMPLATES: dict[str, PromptTemplate] = {"paraphrase": PARAPHRASE, "adversarial": ADVERSARIAL}


class RewriteFailed(RuntimeError):
    """One reference could not be rewritten (no reference, or the LLM call failed); ``error_class`` is the
    call's failure class (:mod:`evalcore.core.errors`), None for no reference (then the model stage's)."""

    def __init__(self, reason: str, error_class: str | None = None) -> None:
        super().__init__(reason)
        self.error_class = error_class


@MODELS.register("reference_rewrite")
class ReferenceRewrite(MusicLM):
    """Rewrites the request's reference answer with an LLM; see the module docstring."""

    uses_audio = False  # its audio is never fetched or decoded
    params_extend = (LLMRunner,)  # ``**llm`` are the runner's (evalcore.core.params)
    params_exclude = ("log_name",)
    llm_backed = True  # a run sets its cache/log roots and holds its budget (pipeline.llm_resources)
    requires = ("openai",)  # checked before any model runs (evalcore.core.packages)
    install_hint = CORE

    def __init__(self, mode: Literal["paraphrase", "adversarial"], base_url: NonEmpty, model: NonEmpty, rpm: Count,
                 tpm: Count, api: Literal["online", "batch"] = "online", sample_rate: Rate = 16_000,
                 max_audio_seconds: Seconds | None = None, **llm: Any) -> None:
        if mode not in TEMPLATES:
            raise ValueError(f"mode must be one of {', '.join(TEMPLATES)}, not {mode!r}")
        self.mode = mode
        self.template = TEMPLATES[mode]
        self.sample_rate = sample_rate
        self.max_audio_seconds = max_audio_seconds
        self.runner = LLMRunner(base_url=base_url, model=model, rpm=rpm, tpm=tpm, api=api,
                                log_name=f"reference_rewrite-{mode}", **llm)

    def shared_budget(self) -> dict[str, Any] | None:
        return self.runner.shared_budget()

    def generation_settings(self) -> dict[str, Any]:
        cfg = self.runner.config
        return {"temperature": cfg.temperature, "seed": cfg.seed, "max_tokens": cfg.max_tokens,
                "template": self.template.tag, "api": self.runner.api}

    def info(self) -> dict[str, Any]:
        return {**super().info(), "checkpoint": f"{self.runner.config.model}+{self.template.tag}"}

    def messages(self, reference: str) -> list[dict]:
        return self.template.render(text=reference)

    def generate(self, batch: Sequence[AudioPrompt]) -> list[Any]:
        """One rewrite per input, in order; a :class:`RewriteFailed` instance for an input that failed."""
        out: list[Any] = [RewriteFailed("no reference answer to rewrite", INPUT) for _ in batch]
        todo = [i for i, inp in enumerate(batch) if inp.reference and inp.reference.strip()]
        done = self.runner.run([self.messages(batch[i].reference) for i in todo],  # type: ignore[arg-type]
                               self.template.tag)
        for i, c in zip(todo, done):
            if c.text is not None and c.error is None:
                out[i] = c.text.strip()
            else:
                out[i] = RewriteFailed(c.error or "no completion", c.error_class)  # the error names the attempts
        return out
