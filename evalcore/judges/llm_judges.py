"""LLM judges: label extraction against a closed vocabulary and MCQ answer matching.

Both call an OpenAI-compatible endpoint through :class:`evalcore.llm.client.LLMClient` with
the versioned prompt templates of :mod:`evalcore.llm.prompts` (the template tag is part of
every cache key), the content-addressed response cache (``cache_root``: the param, else
``$EVALCORE_LLM_CACHE``, else ``./.evalcore-llm-cache``) and, when ``budget`` names one, a
shared :class:`~evalcore.llm.budget.RayBudget` actor (otherwise each process has its own
in-process budget with the configured ``rpm``/``tpm``). The items of one ``judge`` call run
concurrently with :func:`~evalcore.llm.actors.complete_many`.

The judges hold only their constructor params (no key: the key's *variable name* is a
param, the key is read at call time) and build the client lazily, so they pickle cheaply and
can be built from config params inside Ray workers.

* ``llm_extractor`` → ``{"extracted": [...], "dropped": n}``: the model's comma-separated
  labels, matched case-insensitively to the canonical labels of the vocabulary, deduped, in
  order; any other term is *dropped* (never scored) and counted in ``dropped`` (distinct
  terms). An answer of "none" or an empty answer is ``[]``.
* ``mcq_llm`` → ``{"parsed_index": i}``: the option letter A–D the matcher chose, ``-1`` for
  "none", anything unclear, or a letter beyond the item's options. At most four options.

A failed API call (after the client's bounded retries) gives ``{"error": reason}`` (with
``extracted``/``parsed_index`` None), like a missing response; nothing is dropped.
"""

from __future__ import annotations

import os
import re
from typing import Any, Sequence

from evalcore import storage
from evalcore.llm.actors import complete_many
from evalcore.llm.client import Completion, EndpointConfig, LLMClient
from evalcore.llm.prompts import LABEL_EXTRACTION, MCQ_MATCH, PromptTemplate, parse_letter
from evalcore.registry import JUDGES

__all__ = ["LLMExtractorJudge", "McqLLMJudge", "validate_labels", "default_cache_root"]

DEFAULT_CACHE_ROOT = "./.evalcore-llm-cache"
CACHE_ENV = "EVALCORE_LLM_CACHE"
_NONE_ANSWERS = {"", "none", "no labels", "n/a", "empty", "nothing", '""', "''"}


def default_cache_root() -> str:
    root = os.environ.get(CACHE_ENV) or DEFAULT_CACHE_ROOT
    return root if storage.is_s3(root) else os.path.abspath(os.path.expanduser(root))


def validate_labels(output: str | None, vocabulary: Sequence[str]) -> tuple[list[str], int]:
    """(in-vocabulary labels deduped in order, number of distinct out-of-vocabulary terms)."""
    canon = {v.lower(): v for v in vocabulary}
    text = (output or "").strip()
    if text.strip(".\"'` ").lower() in _NONE_ANSWERS:
        return [], 0
    kept: list[str] = []
    dropped: set[str] = set()
    for part in re.split(r"[,\n;]", text):
        term = part.strip().lstrip("-*\u2022 ").strip().strip(".\"'`").strip().lower()
        if not term:
            continue
        label = canon.get(term)
        if label is None:
            dropped.add(term)
        elif label not in kept:
            kept.append(label)
    return kept, len(dropped)


class _LLMJudge:
    """Endpoint, cache, budget and the lazily built client shared by the LLM judges."""

    name = "llm"
    judge_version = "1"
    template: PromptTemplate

    def __init__(
        self,
        base_url: str,
        model: str,
        rpm: int,
        tpm: int,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 5,
        cache_root: str | None = None,
        budget: str | None = None,
        threads: int = 8,
        log_root: str | None = None,
        **endpoint: Any,
    ) -> None:
        cache_root = cache_root or default_cache_root()
        self.config = EndpointConfig(base_url=base_url, model=model, rpm=rpm, tpm=tpm, api_key_env=api_key_env,
                                     timeout_s=timeout_s, max_retries=max_retries, **endpoint)
        self.cache_root = cache_root
        self.budget_name = budget
        self.threads = max(1, int(threads))
        self.log_root = log_root
        self._params = dict(base_url=base_url, model=model, rpm=rpm, tpm=tpm, api_key_env=api_key_env,
                            timeout_s=timeout_s, max_retries=max_retries, cache_root=cache_root, budget=budget,
                            threads=threads, log_root=log_root, **endpoint)
        self._client: LLMClient | None = None

    @property
    def version(self) -> str:
        """Judge code version + prompt template tag (``"1+label_extraction@1"``)."""
        return f"{self.judge_version}+{self.template.tag}"

    # pickling: only the constructor params travel; the client is rebuilt where it is used
    def __getstate__(self) -> dict[str, Any]:
        return {"params": self._params, "template": self.template}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["params"])  # type: ignore[misc]
        if state.get("template") is not None and state["template"] != type(self).template:
            self.template = state["template"]

    @property
    def client(self) -> LLMClient:
        if self._client is None:
            from evalcore.llm.budget import RayBudget, TokenBucketBudget
            from evalcore.llm.cache import RequestLog, ResponseCache

            cfg = self.config
            budget = (RayBudget(self.budget_name, rpm=cfg.rpm, tpm=cfg.tpm) if self.budget_name
                      else TokenBucketBudget(cfg.rpm, cfg.tpm))
            log = RequestLog.for_run(self.log_root, self.name) if self.log_root else None
            self._client = LLMClient(cfg, budget, cache=ResponseCache(self.cache_root), log=log)
        return self._client

    def _complete(self, requests: list[list[dict]]) -> list[Completion]:
        return complete_many(self.client, requests, self.threads, self.template.tag)

    @staticmethod
    def _check(texts: list, options: list) -> None:
        if len(texts) != len(options):
            raise ValueError(f"{len(texts)} texts but {len(options)} option lists")


@JUDGES.register("llm_extractor")
class LLMExtractorJudge(_LLMJudge):
    """Factual-protocol judge: labels of a closed vocabulary named in each response, by an LLM."""

    name = "llm_extractor"
    template = LABEL_EXTRACTION

    def __init__(self, vocabulary: str | Sequence[str] = "instrument", category: str | None = None,
                 **params: Any) -> None:
        if isinstance(vocabulary, str):
            from evalcore.judges.lexicon import LEXICONS

            try:
                labels = LEXICONS[vocabulary].labels
            except KeyError:
                raise KeyError(f"unknown vocabulary {vocabulary!r}; known: {', '.join(sorted(LEXICONS))} "
                               "(or give an explicit list)") from None
            default_category = vocabulary.rsplit("_", 1)[-1]
        else:
            labels = [str(v) for v in vocabulary]
            if not labels:
                raise ValueError("empty vocabulary")
            default_category = "label"
        super().__init__(**params)
        self.vocabulary = vocabulary if isinstance(vocabulary, str) else list(labels)
        self.labels = list(labels)
        self.category = category or default_category
        self._params.update(vocabulary=self.vocabulary, category=category)

    def messages(self, text: str) -> list[dict]:
        return self.template.render(category=self.category, vocabulary=", ".join(self.labels), text=text)

    def judge(self, texts: list[str | None], options: list[list[str] | None]) -> list[dict]:
        """One ``{"extracted": [...], "dropped": n}`` per text; ``options`` is unused."""
        self._check(texts, options)
        todo = [i for i, t in enumerate(texts) if t is not None]
        done = self._complete([self.messages(texts[i]) for i in todo])  # type: ignore[arg-type]
        out: list[dict] = [{"extracted": None, "error": "no response"} for _ in texts]
        for i, c in zip(todo, done):
            if c.error is not None or c.text is None:
                out[i] = {"extracted": None, "error": c.error or "no completion"}
            else:
                labels, dropped = validate_labels(c.text, self.labels)
                out[i] = {"extracted": labels, "dropped": dropped}
        return out


@JUDGES.register("mcq_llm")
class McqLLMJudge(_LLMJudge):
    """MCQ-protocol judge: the option (A–D) a free-form answer chose, by an LLM; -1 = none."""

    name = "mcq_llm"
    template = MCQ_MATCH
    max_options = 4
    missing_option = "(no such option)"

    def __init__(self, question: str = "(not shown; classify the answer by the options)", **params: Any) -> None:
        super().__init__(**params)
        self.question = question
        self._params.update(question=question)

    def messages(self, text: str, options: Sequence[str], question: str | None = None) -> list[dict]:
        opts = [*options, *[self.missing_option] * (self.max_options - len(options))]
        return self.template.render(question=question or self.question, a=opts[0], b=opts[1], c=opts[2],
                                    d=opts[3], response=text)

    def judge(self, texts: list[str | None], options: list[list[str] | None]) -> list[dict]:
        """One ``{"parsed_index": i}`` per text (-1 = unanswered); errors as in ParserJudge."""
        self._check(texts, options)
        out: list[dict] = [{} for _ in texts]
        todo: list[int] = []
        for i, (text, opts) in enumerate(zip(texts, options)):
            if text is None:
                out[i] = {"parsed_index": None, "error": "no response"}
            elif not opts:
                out[i] = {"parsed_index": None, "error": "no options"}
            elif len(opts) > self.max_options:
                out[i] = {"parsed_index": None, "error": f"mcq_llm supports at most {self.max_options} options, "
                                                        f"got {len(opts)}"}
            else:
                todo.append(i)
        done = self._complete([self.messages(texts[i], options[i]) for i in todo])  # type: ignore[arg-type]
        for i, c in zip(todo, done):
            if c.error is not None or c.text is None:
                out[i] = {"parsed_index": None, "error": c.error or "no completion"}
                continue
            letter = parse_letter(c.text)
            idx = ord(letter) - 65 if letter else -1
            out[i] = {"parsed_index": idx if 0 <= idx < len(options[i]) else -1}  # type: ignore[arg-type]
        return out
