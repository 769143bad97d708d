"""The lexical engine: scores (reference, candidate) pairs with the lexical metrics (BLEU, BLEU-4, METEOR, ROUGE) of
a named profile, and with any other registered free-form metric, under the same row rules. It batches and caches;
each metric computes its value in its own file (:mod:`~evalcore.textmetrics.registered.bleu`,
:mod:`~evalcore.textmetrics.registered.bleu4`, :mod:`~evalcore.textmetrics.registered.meteor`,
:mod:`~evalcore.textmetrics.registered.rouge`: :meth:`LexicalMetric.value` of one pair).

Profiles: ``mullama``, what the published MU-LLaMA evaluation script computes per pair; ``standard``, textbook
word-level definitions, plus corpus BLEU (sacreBLEU, 13a, ``exp``) over the scored rows as a separate aggregate.
Each metric's file states its definitions (``definitions``: profile → text).

Row rules (both profiles, both paths): a non-string candidate, a missing/blank or
non-string reference, or a text longer than ``max_chars`` gives NaN in every metric and
an error string; an empty (or whitespace-only) candidate scores 0.0 in every metric
with no error; a library exception on a row becomes that row's error (NaN in every lexical metric of the row).

Other registered metrics (:mod:`evalcore.textmetrics.freeform_metric`; e.g. ``bertscore``, ``cider``,
``claptext``, their settings in :class:`ModelMetrics`) score through their own :meth:`~evalcore.textmetrics.
freeform_metric.FreeformMetric.score`, after the same row checks (an empty candidate scores 0.0; a corpus
metric keeps it in its corpus); a metric failing on rows gives NaN in that metric and its message in the
row's error.

What the engine shares between the lexical metrics of a process (:class:`PairTools`): with ``fast=True`` (the
default) each distinct (reference, candidate) pair is scored once, tokenisations, stems and WordNet lookups are
cached through the libraries' own parameters (``RougeScorer(tokenizer=)``, ``meteor_score(stemmer=, wordnet=)``),
nltk's ``sentence_bleu`` is called once per pair with every weight tuple the profile's BLEU metrics ask for, and
chunks are spread over processes; its values are identical to ``fast=False``, the plain per-pair loop of the
libraries' defaults.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import version
from typing import Any, Callable, Hashable, Mapping, Sequence, cast

from evalcore.textmetrics.freeform_metric import FreeformMetric, MetricParams, metric_class, ordered, registered
from evalcore.textmetrics.metric_config import FreeformMetrics
from evalcore.textmetrics.wordnet import ensure_wordnet

PROFILES = ("mullama", "standard")
MAX_CHARS = 50_000
PARALLEL_MIN = 2000  # fewer distinct pairs than this are scored in-process
#: the libraries of the lexical engine (both profiles: nltk or sacrebleu BLEU, nltk METEOR, rouge-score ROUGE)
LEXICAL_LIBRARIES = ("nltk", "rouge-score", "sacrebleu")


class LexicalMetric(FreeformMetric):
    """A per-pair lexical metric scored by the engine here: :meth:`value` computes one pair's value with the
    engine's shared helpers; ``definitions``: profile → what it computes. Scored in the stream's scoring tasks, no
    model, no settings."""

    definitions: dict[str, str] = {}
    libraries = LEXICAL_LIBRARIES
    stream = "lexical"
    default = True
    #: nltk ``sentence_bleu`` weights it asks :meth:`PairTools.sentence_bleu` for in this profile (the engine
    #: computes every weight tuple of a pair's metrics in one call); none by default
    nltk_bleu_weights: dict[str, tuple[float, ...]] = {}

    def definition(self) -> str:
        return self.definitions[self.profile]

    def setup(self) -> None:
        """Provision what it needs once per process before its first pair (e.g. WordNet); nothing by default."""

    def value(self, ref: str, cand: str, tools: PairTools) -> float:
        """The metric of one checked pair (non-empty candidate, reference within ``max_chars``)."""
        raise NotImplementedError

    def aggregate_definitions(self) -> dict[str, str]:
        """Aggregates over all scored pairs it computes in this profile (name → definition); none by default."""
        return {}

    def aggregates(self, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
        """Those aggregates over the pairs scored without error (name → value)."""
        return {}


def is_lexical(name: str) -> bool:
    return issubclass(metric_class(name), LexicalMetric)


def lexical_names(names: Sequence[str] | None = None) -> list[str]:
    """The lexical metrics among ``names`` (default: all registered), in registration order."""
    return [n for n in ordered(registered() if names is None else names) if is_lexical(n)]


@dataclass
class PairScores:
    """Per-row metric values (NaN on error), per-row errors, aggregates and provenance."""

    profile: str
    values: dict[str, list[float]]
    errors: list[str | None]
    corpus: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelMetrics:
    """The settings of the metrics that take them (metric name → its ``Params``, e.g. ``{"bertscore":
    BertScoreConfig(...)}``), the run's S3 options, whether a metric may use Ray actors of its own (``ray``), and
    the models once loaded (kept for the next call)."""

    settings: Mapping[str, MetricParams] = field(default_factory=dict)
    s3: dict | None = None
    ray: bool = True
    loaded: dict = field(default_factory=dict, compare=False, repr=False)

    def metric(self, name: str, profile: str) -> FreeformMetric:
        """Metric ``name`` built with its settings."""
        return metric_class(name)(name, profile, self.settings.get(name), self.s3, ray=self.ray)


def model_metrics(cfg: FreeformMetrics, s3: Mapping[str, Any] | None = None, ray: bool = True) -> ModelMetrics:
    """The :class:`ModelMetrics` of a protocol's configured metrics (``s3``: the run's S3 options; ``ray=False``:
    no Ray actors of a metric's own, e.g. inside the stream's metric actors)."""
    settings = {n: p for n in cfg.names if (p := cfg.settings(n)) is not None}
    return ModelMetrics(settings=settings, s3=dict(s3) if s3 else None, ray=ray)


def library_versions(metrics: Sequence[str] | None = None) -> dict[str, str]:
    """Versions of the libraries the metrics come from (default: the lexical ones), in registration order."""
    names = [lib for m in ordered(lexical_names() if metrics is None else metrics)
             for lib in metric_class(m).libraries]
    return {p: version(p) for p in dict.fromkeys(names)}


def check_pair(ref: Any, cand: Any, max_chars: int = MAX_CHARS) -> str | None:
    """The reason a row cannot be scored, "" for an empty candidate (scores 0.0), or None."""
    if not isinstance(ref, str) or not ref.strip():
        return f"missing reference ({type(ref).__name__})" if not isinstance(ref, str) else "empty reference"
    if not isinstance(cand, str):
        return f"candidate is not a string ({type(cand).__name__})"
    for what, text in (("reference", ref), ("candidate", cand)):
        if len(text) > max_chars:
            return f"{what} too long ({len(text)} chars > {max_chars})"
    return "" if not cand.strip() else None


class PairTools:
    """What the lexical metrics of one profile share in a process: tokenisations, stems and WordNet lookups
    (cached when ``fast``, the libraries' defaults otherwise), objects built once (:meth:`once`) and nltk's sentence
    BLEU of a pair for every weight tuple the metrics ask for (one call when ``fast``)."""

    def __init__(self, profile: str, fast: bool, bleu_weights: Sequence[tuple[float, ...]] = ()) -> None:
        from nltk.tokenize import wordpunct_tokenize

        self.profile, self.fast = profile, fast
        self.bleu_weights = list(dict.fromkeys(bleu_weights))
        self._built: dict[Hashable, Any] = {}
        self._bleu: tuple[tuple[str, str], dict[tuple[float, ...], float]] | None = None
        self._words = lru_cache(maxsize=200_000)(lambda s: tuple(wordpunct_tokenize(s))) if fast else None
        self._wordpunct = wordpunct_tokenize

    def once(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The object ``build()`` made the first time ``key`` was asked for (a scorer, a BLEU object)."""
        if key not in self._built:
            self._built[key] = build()
        return self._built[key]

    def words(self, text: str) -> list[str]:
        """nltk's ``wordpunct_tokenize(text)``."""
        return list(self._words(text)) if self._words is not None else self._wordpunct(text)

    def meteor_caches(self) -> dict[str, Any]:
        """``meteor_score``'s ``stemmer`` and ``wordnet`` (its defaults, cached) when fast; none otherwise."""
        if not self.fast:
            return {}

        def build() -> dict[str, Any]:
            from nltk.corpus import wordnet
            from nltk.stem.porter import PorterStemmer

            return {"stemmer": _CachedStemmer(PorterStemmer()), "wordnet": _CachedWordNet(wordnet)}

        return self.once("meteor_caches", build)

    def tokenizer(self, tokenizer: Any) -> Any:
        """A rouge-score tokenizer, cached when fast."""
        return _CachedTokenizer(tokenizer) if self.fast else tokenizer

    def sentence_bleu(self, ref: str, cand: str, weights: tuple[float, ...]) -> float:
        """nltk ``sentence_bleu([ref], cand, weights=weights)``; when fast, one call per pair computes every weight
        tuple of :attr:`bleu_weights` (their n-gram counts shared)."""
        from nltk.translate.bleu_score import sentence_bleu

        if not self.fast or weights not in self.bleu_weights:
            return sentence_bleu([ref], cand, weights=weights)
        if self._bleu is None or self._bleu[0] != (ref, cand):
            values = sentence_bleu([ref], cand, weights=self.bleu_weights)  # one weight tuple: one float back
            values = values if len(self.bleu_weights) > 1 else [values]
            self._bleu = ((ref, cand), dict(zip(self.bleu_weights, values)))
        return self._bleu[1][weights]


class _Engine:
    """The lexical metrics of one profile over pairs, in a process (the driver's, or a pool worker's)."""

    def __init__(self, profile: str, metrics: Sequence[LexicalMetric], fast: bool) -> None:
        self.profile, self.metrics, self.fast = profile, list(metrics), fast
        self.names = tuple(m.name for m in self.metrics)
        for m in self.metrics:
            m.setup()
        self.tools = PairTools(profile, fast, [w for m in self.metrics
                                               if (w := m.nltk_bleu_weights.get(profile)) is not None])

    def pair(self, ref: str, cand: str) -> tuple[tuple[float, ...], str | None]:
        """Each metric's value of a checked pair (in :attr:`metrics` order) and an error (None when fine)."""
        try:
            with warnings.catch_warnings():  # nltk warns on zero n-gram overlap; values unaffected
                warnings.simplefilter("ignore")
                return tuple(float(m.value(ref, cand, self.tools)) for m in self.metrics), None
        except Exception as e:  # a library failing on one odd row is that row's error
            return (math.nan,) * len(self.metrics), f"{type(e).__name__}: {e}"[:500]


class _CachedStemmer:
    def __init__(self, stemmer: Any) -> None:
        self.stem = lru_cache(maxsize=500_000)(stemmer.stem)


class _CachedWordNet:
    def __init__(self, wordnet: Any) -> None:
        self.synsets = lru_cache(maxsize=500_000)(wordnet.synsets)


class _CachedTokenizer:
    def __init__(self, tokenizer: Any) -> None:
        self._cached = lru_cache(maxsize=200_000)(lambda text: tuple(tokenizer.tokenize(text)))

    def tokenize(self, text: str) -> list[str]:
        return list(self._cached(text))


_WORKER: _Engine | None = None
_Job = tuple[str, list[LexicalMetric], list[tuple[str, str]]]


def _init_worker(nltk_path: list[str]) -> None:
    import nltk

    nltk.data.path[:] = nltk_path


def _work(args: _Job) -> list[tuple[tuple[float, ...], str | None]]:
    """Score pairs with the process's fast engine (kept for the next chunk of the same profile and metrics)."""
    global _WORKER
    profile, metrics, pairs = args
    if _WORKER is None or (_WORKER.profile, _WORKER.names) != (profile, tuple(m.name for m in metrics)):
        _WORKER = _Engine(profile, metrics, fast=True)
    return [_WORKER.pair(r, c) for r, c in pairs]


def _score_unique(profile: str, metrics: list[LexicalMetric], pairs: list[tuple[str, str]],
                  workers: int) -> list[tuple[tuple[float, ...], str | None]]:
    if workers <= 1 or len(pairs) < PARALLEL_MIN:
        return _work((profile, metrics, pairs))
    import nltk

    for m in metrics:
        m.setup()  # provision once here (WordNet), not racing in every worker
    n_chunks = workers * 4
    size = -(-len(pairs) // n_chunks)
    chunks = [(profile, metrics, pairs[i:i + size]) for i in range(0, len(pairs), size)]
    # spawn, not fork: a forked WordNet reader shares its open data files' offsets across
    # processes, and concurrent seeks then return wrong synsets.
    with mp.get_context("spawn").Pool(workers, initializer=_init_worker, initargs=(list(nltk.data.path),)) as pool:
        return [r for part in pool.map(_work, chunks) for r in part]


def score_pairs(
    references: Sequence[Any],
    candidates: Sequence[Any],
    profile: str = "mullama",
    fast: bool = True,
    workers: int | None = None,
    max_chars: int = MAX_CHARS,
    metrics: Sequence[str] | None = None,
    models: ModelMetrics | None = None,
    corpora: Sequence[Hashable] | None = None,
) -> PairScores:
    """Score candidate/reference pairs with ``profile``; see the module docstring for row rules.

    ``metrics`` defaults to the lexical metrics; ``corpora`` labels rows sharing a corpus metric's IDF.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {PROFILES}")
    if len(references) != len(candidates):
        raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
    wanted = list(lexical_names() if metrics is None else metrics)
    known = registered()
    unknown = [m for m in wanted if m not in known]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; one of {tuple(known)}")
    lexical = lexical_names(wanted)
    checks = [check_pair(r, c, max_chars) for r, c in zip(references, candidates)]
    values: dict[str, list[float]] = {}
    errors: list[str | None] = [None if e in (None, "") else e for e in checks]
    if lexical:
        got, lex_errors = _score_lexical(references, candidates, checks, profile, lexical, fast, workers)
        values.update(got)
        errors = [_join(a, b) for a, b in zip(errors, lex_errors)]
    lexical_errors = list(errors)
    info = _info(profile, max_chars, wanted)
    models = models or ModelMetrics()
    for m in ordered([m for m in wanted if m not in lexical]):
        vals, errs, meta = models.metric(m, profile).score(references, candidates, checks, corpora, models.loaded)
        values[m] = vals
        errors = [_join(a, b) for a, b in zip(errors, errs)]
        info["definitions"][m] = meta.pop("definition")
        info.setdefault("models", {})[m] = meta
    out = PairScores(profile, values, errors, info=info)
    scored = [(r, c) for r, c, e in zip(references, candidates, lexical_errors) if e is None]
    out.corpus.update(corpus_aggregates(scored, profile, lexical))
    return out


def corpus_aggregates(pairs: Sequence[tuple[str, str]], profile: str, metrics: Sequence[str]) -> dict[str, float]:
    """The corpus-level figures of the lexical ``metrics`` over (reference, candidate) ``pairs`` (e.g. the
    standard profile's corpus BLEU), by name."""
    out: dict[str, float] = {}
    for m in lexical_names(metrics):
        out.update(metric_class(m)(m, profile).aggregates(pairs))  # type: ignore[attr-defined]
    return out


def _join(a: str | None, b: str | None) -> str | None:
    return a if b is None else b if a is None else f"{a}; {b}"


def _score_lexical(references: Sequence[Any], candidates: Sequence[Any], checks: list[str | None], profile: str,
                   names: Sequence[str], fast: bool, workers: int | None
                   ) -> tuple[dict[str, list[float]], list[str | None]]:
    """The lexical metrics ``names`` per row (documented values on checked-out rows) and library errors."""
    metrics = [cast(LexicalMetric, metric_class(n)(n, profile)) for n in names]
    todo = [(r, c) for r, c, e in zip(references, candidates, checks) if e is None]
    if fast:
        unique = list(dict.fromkeys(todo))
        n = workers if workers is not None else min(os.cpu_count() or 1, 8)
        got = dict(zip(unique, _score_unique(profile, metrics, unique, n)))
        results = [got[p] for p in todo]
    else:
        plain = _Engine(profile, metrics, fast=False)
        results = [plain.pair(r, c) for r, c in todo]
    nan, zero = (math.nan,) * len(names), (0.0,) * len(names)
    values: dict[str, list[float]] = {m: [] for m in names}
    errors: list[str | None] = []
    it = iter(results)
    for e in checks:
        vals, err = next(it) if e is None else ((zero, None) if e == "" else (nan, None))
        for m, v in zip(names, vals):
            values[m].append(v)
        errors.append(err)  # a library exception on a row (check errors are the caller's)
    return values, errors


def _info(profile: str, max_chars: int, metrics: Sequence[str]) -> dict[str, Any]:
    lexical = lexical_names(metrics)
    wordnet_version = None
    if lexical:
        from nltk.corpus import wordnet

        ensure_wordnet()
        wordnet_version = f"WordNet {wordnet.get_version()}"
    built = [cast(LexicalMetric, metric_class(m)(m, profile)) for m in lexical]
    defs = {m.name: m.definition() for m in built} | corpus_definitions(profile, lexical)
    return {"profile": profile, "metrics": list(metrics), "versions": library_versions(metrics),
            "wordnet": wordnet_version, "definitions": defs, **row_rules(max_chars)}


def corpus_definitions(profile: str, metrics: Sequence[str]) -> dict[str, str]:
    """The definitions of the corpus-level figures :func:`corpus_aggregates` gives (e.g. ``corpus_bleu``)."""
    out: dict[str, str] = {}
    for m in lexical_names(metrics):
        out.update(cast(LexicalMetric, metric_class(m)(m, profile)).aggregate_definitions())
    return out


def row_rules(max_chars: int = MAX_CHARS) -> dict[str, Any]:
    """How :func:`score_pairs` treats a row it cannot score and an empty candidate, as the definitions state it."""
    return {"max_chars": max_chars, "empty_candidate": "0.0 in every metric",
            "bad_row": "NaN in every metric + error string"}
