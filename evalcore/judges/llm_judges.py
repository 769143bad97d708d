"""LLM judges: label extraction against a closed vocabulary and MCQ answer matching.

Both call an OpenAI-compatible endpoint through :class:`evalcore.llm.runner.LLMRunner` with
the versioned prompt templates of :mod:`evalcore.llm.prompts` (the template tag is part of
every cache key), the content-addressed response cache (``cache_root``: the param, else
``$EVALCORE_LLM_CACHE``, else ``./.evalcore-llm-cache``; inside ``evalcore run`` the run's root,
see :mod:`evalcore.pipeline.llm_resources`), a request/response log under
``<log_root or cache_root>/llm-log/`` and, when ``budget`` names one, a shared
:class:`~evalcore.llm.budget.RayBudget` actor (otherwise each process has its own
in-process budget with the configured ``rpm``/``tpm``). ``mode: online`` (default) runs the
items of one ``judge`` call concurrently; ``mode: batch`` sends them through the OpenAI Batch
API (``batch_poll_s``, ``batch_timeout_s``; a restarted run resumes polling a batch it had
already submitted instead of submitting it again).

The judges hold only their constructor params (no key: the key's *variable name* is a
param, the key is read at call time) and build the client lazily, so they pickle cheaply and
can be built from config params inside Ray workers.

* ``llm_extractor`` → ``{"extracted": [...], "dropped": n}``: the model's comma-separated
  labels, lowercased and mapped to the canonical labels of the vocabulary, deduped, in order; any
  other term is *dropped* (never scored) and counted in ``dropped`` (distinct terms). An answer of
  "none" or an empty answer is ``[]``. Before that check, the paper's deterministic post-processing
  (§4.1, App. D) maps variants to canonical labels (``canonicalize``): ``paper`` (default) maps the
  variants an instrument vocabulary's lexicon knows ("grand piano" → piano, "French horn" → horn,
  "double bass" / "contrabass" → bass) and, like the paper, no genre or composer variant; ``lexicon``
  maps the variants of any named vocabulary's lexicon; ``none`` only lowercases. ``vocabulary:
  auto`` takes each row's vocabulary from its task (``tasks``, else the built-in map, as the lexicon
  judge); with ``tree`` (FMA ``genres.csv``) ``genre-tree`` and ``genre-node`` rows are extracted over
  every genre of the tree and ``genre-tree`` labels reported as their top-level genre (same-tree credit),
  ``genre-node`` ones as they are (same node). A row with options (binary choice) is extracted over its
  two presented labels and also gets ``parsed_index`` (the one label named, else -1).
* ``mcq_llm`` → ``{"parsed_index": i}``: the option letter A–D the matcher chose, ``-1`` for
  "none", anything unclear, or a letter beyond the item's options. At most four options.
  ``output: json`` asks for structured output ``{"choice": "A".."D" | "none"}`` (the
  ``mcq_match_json`` template; ``response_format`` json_schema where the server supports it,
  validated, bounded retries on invalid JSON, then an error); ``output: text`` (default) is
  the one-letter text answer.

A failed API call (after the client's bounded retries) gives ``{"error": reason, "error_class": class}``
(with ``extracted``/``parsed_index`` None; the class from :mod:`evalcore.core.errors`: a connection error is
``transient``, retried by ``evalcore run --resume``), like a missing response; nothing is dropped.
"""

from __future__ import annotations

import re
from typing import Any, Literal, Sequence

from pydantic import BaseModel

from evalcore.llm.client import Completion, EndpointConfig, LLMClient
from evalcore.llm.prompts import (LABEL_EXTRACTION, LABEL_EXTRACTION_PAPER, MCQ_MATCH, MCQ_MATCH_JSON, McqChoice,
                                  PromptTemplate, parse_letter)
from evalcore.llm.runner import CACHE_ENV, DEFAULT_CACHE_ROOT, LLMRunner, default_cache_root
from evalcore.core.packages import CORE
from evalcore.judges.base import JUDGES, JudgeBase, Judgment
from evalcore.vocab.files import read_genre_tree
from evalcore.vocab.labels import FMA_GENRES, GENRE_TREE_TASKS, lexicon_name
from evalcore.vocab.lexicon import LEXICONS, LexiconName, VocabularyName, restrict

__all__ = ["LLMExtractorJudge", "McqLLMJudge", "validate_labels", "default_cache_root", "CACHE_ENV",
           "DEFAULT_CACHE_ROOT"]

_NONE_ANSWERS = {"", "none", "no labels", "n/a", "empty", "nothing", '""', "''"}


def validate_labels(output: str | None, vocabulary: Sequence[str],
                    variants: Any = None) -> tuple[list[str], int]:
    """(in-vocabulary labels deduped in order, number of distinct out-of-vocabulary terms). ``variants``: a
    :class:`~evalcore.vocab.lexicon.Lexicon` whose surface forms map a whole term to its canonical label first."""
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
        if label is None and variants is not None:
            whole = [lab for start, end, lab in variants.mentions(term) if (start, end) == (0, len(term))]
            label = canon.get(str(whole[0]).lower()) if whole and whole[0] is not None else None
        if label is None:
            dropped.add(term)
        elif label not in kept:
            kept.append(label)
    return kept, len(dropped)


class _LLMJudge(JudgeBase):
    """Endpoint, cache, budget and the lazily built client shared by the LLM judges."""

    params_extend = (LLMRunner,)  # ``**params`` are the runner's (evalcore.core.params)
    params_exclude = ("api", "log_name")  # set from ``mode`` and the judge's name

    judge_version = "1"
    llm_backed = True  # a run sets its cache/log roots and holds its budget (pipeline.llm_resources)
    requires = ("openai",)  # checked before any judge runs (evalcore.core.packages)
    install_hint = CORE
    template: PromptTemplate
    schema: type[BaseModel] | None = None

    def __init__(self, mode: Literal["online", "batch"] = "online", **params: Any) -> None:
        self.runner = LLMRunner(api=mode, log_name=self.name, **params)
        self._params = {**self.runner.params, "mode": mode}
        del self._params["api"], self._params["log_name"]

    @property
    def config(self) -> EndpointConfig:
        return self.runner.config

    @property
    def cache_root(self) -> str:
        return self.runner.cache_root

    @property
    def mode(self) -> str:
        return self.runner.api

    @property
    def _client(self) -> LLMClient | None:
        return self.runner._client

    @property
    def client(self) -> LLMClient:
        return self.runner.client

    def shared_budget(self) -> dict[str, Any] | None:
        return self.runner.shared_budget()

    @property
    def version(self) -> str:
        """Judge code version + prompt template tag (``"1+label_extraction@1"``)."""
        return f"{self.judge_version}+{self.template.tag}"

    # pickling: only the constructor params travel; the client is rebuilt where it is used
    def __getstate__(self) -> dict[str, Any]:
        return {"params": self._params, "template": self.template}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["params"])  # type: ignore[misc]
        if state.get("template") is not None and state["template"] != self.template:
            self.template = state["template"]

    def _complete(self, requests: list[list[dict]]) -> list[Completion]:
        return self.runner.run(requests, self.template.tag, self.schema)

    @staticmethod
    def _check(texts: list, options: list) -> None:
        if len(texts) != len(options):
            raise ValueError(f"{len(texts)} texts but {len(options)} option lists")


#: the llm_extractor's ``prompt`` param: evalcore's rules (:data:`LABEL_EXTRACTION`) or App. B.1 word for word
EXTRACTION_PROMPTS: dict[str, PromptTemplate] = {"evalcore": LABEL_EXTRACTION, "paper": LABEL_EXTRACTION_PAPER}


@JUDGES.register("llm_extractor")
class LLMExtractorJudge(_LLMJudge):
    """Factual-protocol judge: labels of a closed vocabulary named in each response, by an LLM."""

    path_params = {"tree": "file"}  # must exist (evalcore validate)
    judge_version = "2"
    template = LABEL_EXTRACTION
    uses_tasks = True  # vocabulary "auto" and the genre tree read each row's task

    def __init__(self, vocabulary: VocabularyName | Sequence[str] = "instrument", category: str | None = None,
                 canonicalize: Literal["paper", "lexicon", "none"] = "paper", tree: str | None = None,
                 tasks: dict[str, LexiconName] | None = None, prompt: Literal["evalcore", "paper"] = "evalcore",
                 **params: Any) -> None:
        if canonicalize not in ("paper", "lexicon", "none"):
            raise ValueError(f"canonicalize must be paper, lexicon or none, not {canonicalize!r}")
        if prompt not in EXTRACTION_PROMPTS:
            raise ValueError(f"prompt must be {' or '.join(EXTRACTION_PROMPTS)}, not {prompt!r}")
        self.template = EXTRACTION_PROMPTS[prompt]
        if isinstance(vocabulary, str):
            if vocabulary != "auto" and vocabulary not in LEXICONS:
                raise KeyError(f"unknown vocabulary {vocabulary!r}; known: auto, {', '.join(sorted(LEXICONS))} "
                               "(or give an explicit list)")
            labels = LEXICONS[vocabulary].labels if vocabulary != "auto" else []
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
        self.canonicalize, self.tasks = canonicalize, dict(tasks or {})
        self.tree = read_genre_tree(tree) if tree else {}
        self._params.update(vocabulary=self.vocabulary, category=category, canonicalize=canonicalize, tree=tree,
                            tasks=tasks, prompt=prompt)

    def _lexicon_name(self, task: str | None) -> str | None:
        """The named lexicon behind a row's vocabulary (None for an explicit list)."""
        if not isinstance(self.vocabulary, str):
            return None
        if self.vocabulary != "auto":
            return self.vocabulary
        base = re.sub(r"-(?:binary|true-false)$", "", str(task))  # a derived format's task: its source task
        return self.tasks.get(str(task)) or self.tasks.get(base) or lexicon_name(base)

    def _variants(self, name: str | None, labels: Sequence[str]) -> Any:
        """The lexicon whose variants post-processing maps for a row (None: lowercase only)."""
        if name is None or self.canonicalize == "none":
            return None
        if self.canonicalize == "paper" and name not in ("instrument", "musicnet_instrument"):
            return None  # §4.1: no normalisation for genres, nor composers
        return restrict(LEXICONS[name], list(labels))

    def row_vocabulary(self, task: str | None, options: Sequence[str] | None) -> tuple[list[str], Any, dict]:
        """(labels shown and accepted, variants lexicon, genre → top-level map) of one row."""
        if options:
            try:
                name = self._lexicon_name(task)
            except ValueError:
                name = None  # the presented labels are the vocabulary whatever the task
            return list(options), self._variants(name, options), {}
        name = self._lexicon_name(task)
        if task in GENRE_TREE_TASKS and self.tree and name == "genre":
            labels = list(dict.fromkeys([*FMA_GENRES, *self.tree, *self.tree.values()]))
            return labels, self._variants(name, labels), self.tree if task == "genre-tree" else {}
        labels = self.labels if self.vocabulary != "auto" else LEXICONS[str(name)].labels
        return list(labels), self._variants(name, labels), {}

    def messages(self, text: str, labels: Sequence[str] | None = None) -> list[dict]:
        return self.template.render(category=self.category, vocabulary=", ".join(labels or self.labels), text=text)

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One ``{"extracted": [...], "dropped": n}`` per text (with ``parsed_index`` for rows with options)."""
        self._check(texts, options)
        tasks = list(tasks) if tasks is not None else [None] * len(texts)
        out: list[Judgment] = [{"extracted": None, "error": "no response"} for _ in texts]
        todo, vocab = [], {}
        for i, t in enumerate(texts):
            if t is None:
                continue
            try:
                vocab[i] = self.row_vocabulary(tasks[i], options[i])
            except ValueError as e:  # vocabulary "auto" and a task it does not know
                out[i] = {"extracted": None, "error": f"llm_extractor: {e}"}
                continue
            todo.append(i)
        done = self._complete([self.messages(texts[i], vocab[i][0]) for i in todo])  # type: ignore[arg-type]
        for i, c in zip(todo, done):
            if c.error is not None or c.text is None:
                out[i] = {"extracted": None, "error": c.error or "no completion", "error_class": c.error_class}
                continue
            labels, variants, top = vocab[i]
            kept, dropped = validate_labels(c.text, labels, variants)
            if top:
                kept = list(dict.fromkeys(top.get(lab, lab) for lab in kept))
            out[i] = {"extracted": kept, "dropped": dropped}
            if options[i]:
                out[i]["parsed_index"] = list(options[i]).index(kept[0]) if len(kept) == 1 else -1  # type: ignore
        return out


@JUDGES.register("mcq_llm")
class McqLLMJudge(_LLMJudge):
    """MCQ-protocol judge: the option (A–D) a free-form answer chose, by an LLM; -1 = none."""

    uses_questions = True  # the pipeline passes each request's question
    template = MCQ_MATCH
    max_options = 4
    missing_option = "(no such option)"

    def __init__(self, question: str = "(not shown; classify the answer by the options)",
                 output: Literal["text", "json"] = "text", **params: Any) -> None:
        if output not in ("text", "json"):
            raise ValueError(f"output must be text or json, not {output!r}")
        super().__init__(**params)
        self.question = question
        self.output = output
        if output == "json":
            self.template, self.schema = MCQ_MATCH_JSON, McqChoice
        self._params.update(question=question, output=output)

    def messages(self, text: str, options: Sequence[str], question: str | None = None) -> list[dict]:
        opts = [*options, *[self.missing_option] * (self.max_options - len(options))]
        return self.template.render(question=question or self.question, a=opts[0], b=opts[1], c=opts[2],
                                    d=opts[3], response=text)

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One ``{"parsed_index": i}`` per text (-1 = unanswered); errors as in ParserJudge. ``questions``
        (the pipeline passes each request's) are shown to the matcher; else the ``question`` param. ``tasks``
        are not read."""
        self._check(texts, options)
        qs = list(questions) if questions is not None else [None] * len(texts)
        if len(qs) != len(texts):
            raise ValueError(f"{len(qs)} questions for {len(texts)} texts")
        out: list[Judgment] = [{} for _ in texts]
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
        done = self._complete([self.messages(texts[i], options[i], qs[i]) for i in todo])  # type: ignore[arg-type]
        for i, c in zip(todo, done):
            if c.error is not None or c.text is None:
                out[i] = {"parsed_index": None, "error": c.error or "no completion", "error_class": c.error_class}
                continue
            letter = c.data["choice"] if self.schema is not None else parse_letter(c.text)
            idx = ord(letter) - 65 if letter in ("A", "B", "C", "D") else -1
            out[i] = {"parsed_index": idx if 0 <= idx < len(options[i]) else -1}  # type: ignore[arg-type]
        return out
