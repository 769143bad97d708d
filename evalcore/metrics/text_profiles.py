"""Free-form text metrics (BLEU, BLEU-4, METEOR, ROUGE) in two named profiles.

``mullama``: what the published MU-LLaMA evaluation script computes, per pair:
nltk ``sentence_bleu([ref], cand)`` on the raw strings (character n-grams, weights
0.25×4, no smoothing), the same with weights (0, 0, 0, 1) for BLEU-4, nltk
``meteor_score([wordpunct_tokenize(ref)], wordpunct_tokenize(cand))`` and rouge-score
ROUGE-L **recall** with ``use_stemmer=True``.

``standard``: textbook word-level definitions, per pair: sacreBLEU sentence BLEU
(13a tokenizer, ``exp`` smoothing, effective order), sacreBLEU sentence BLEU-4 (13a,
no smoothing, full order 4: zero without a 4-gram match), nltk METEOR on lowercased
wordpunct tokens, rouge-score ROUGE-L F-measure with the stemmer; plus corpus BLEU
(sacreBLEU, 13a, ``exp``) over the scored rows as a separate aggregate.

Row rules (both profiles, both paths): a non-string candidate, a missing/blank or
non-string reference, or a text longer than ``max_chars`` gives NaN in every metric and
an error string; an empty (or whitespace-only) candidate scores 0.0 in every metric
with no error; a library exception on a row becomes that row's error.

Other registered metrics (:mod:`evalcore.metrics.freeform_metric`; e.g. ``bertscore``, ``cider``,
``claptext``, their settings in :class:`ModelMetrics`) score through their own :meth:`~evalcore.metrics.
freeform_metric.FreeformMetric.score`, after the same row checks (an empty candidate scores 0.0; a corpus
metric keeps it in its corpus); a metric failing on rows gives NaN in that metric and its message in the
row's error. The lexical ones are :class:`LexicalMetric` registrations scored together here.

``score_pairs(..., fast=True)`` scores each distinct (reference, candidate) pair once,
caches tokenisations, stems and WordNet lookups through the libraries' own parameters
(``RougeScorer(tokenizer=)``, ``meteor_score(stemmer=, wordnet=)``, one
``sentence_bleu`` call with both weight tuples) and spreads chunks over processes;
its values are identical to ``fast=False``, the plain per-pair loop.
"""

from __future__ import annotations

import logging
import math
import multiprocessing as mp
import os
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib.metadata import version
from typing import Any, Hashable, Mapping, Sequence

from evalcore.metrics.freeform_metric import FreeformMetric, MetricParams, metric_class, ordered, registered
from evalcore.metrics.metric_config import FreeformMetrics
from evalcore.metrics.wordnet import ensure_wordnet

PROFILES = ("mullama", "standard")
#: what the lexical engine computes per pair, in the order :meth:`_Plain.pair` returns it (the engine's layout,
#: not a list of configurable metrics: those are the :class:`LexicalMetric` registrations)
_OUTPUTS = ("bleu", "bleu4", "meteor", "rouge")
MAX_CHARS = 50_000
PARALLEL_MIN = 2000  # fewer distinct pairs than this are scored in-process
W_BLEU = (0.25, 0.25, 0.25, 0.25)
W_BLEU4 = (0.0, 0.0, 0.0, 1.0)
_NAN = (math.nan,) * len(_OUTPUTS)
_ZERO = (0.0,) * len(_OUTPUTS)
#: the standard profile's corpus aggregate (not a per-pair metric)
CORPUS_BLEU = "sacrebleu corpus BLEU/100 over scored rows, tokenize=13a, smooth=exp"
#: the libraries of the lexical engine (both profiles: nltk or sacrebleu BLEU, nltk METEOR, rouge-score ROUGE)
LEXICAL_LIBRARIES = ("nltk", "rouge-score", "sacrebleu")


class LexicalMetric(FreeformMetric):
    """A per-pair lexical metric of the profile engine here (its value: the engine's output of its name);
    ``definitions``: profile → what it computes. Scored in the stream's scoring tasks, no model, no settings."""

    definitions: dict[str, str] = {}
    libraries = LEXICAL_LIBRARIES
    stream = "lexical"
    default = True

    def definition(self) -> str:
        return self.definitions[self.profile]


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


def _quiet_effective_order(record: logging.LogRecord) -> bool:
    """Drop sacreBLEU's per-sentence advice to enable effective_order (BLEU-4 disables it on purpose)."""
    return "effective_order" not in record.getMessage()


class _Plain:
    """Direct library calls, one pair at a time (the reference implementation)."""

    def __init__(self, profile: str) -> None:
        from rouge_score.rouge_scorer import RougeScorer

        ensure_wordnet()
        self.profile = profile
        self.rouge = RougeScorer(["rougeL"], use_stemmer=True)
        if profile == "standard":
            import sacrebleu

            self.sb = sacrebleu.BLEU(tokenize="13a", smooth_method="exp", effective_order=True)
            self.sb4 = sacrebleu.BLEU(tokenize="13a", smooth_method="none", effective_order=False)
            logging.getLogger("sacrebleu").addFilter(_quiet_effective_order)

    def bleus(self, ref: str, cand: str) -> tuple[float, float]:
        from nltk.translate.bleu_score import sentence_bleu

        if self.profile == "standard":
            return self.sb.sentence_score(cand, [ref]).score / 100.0, self.sb4.sentence_score(cand, [ref]).score / 100.0
        return sentence_bleu([ref], cand), sentence_bleu([ref], cand, weights=W_BLEU4)

    def meteor(self, ref: str, cand: str) -> float:
        from nltk.tokenize import wordpunct_tokenize
        from nltk.translate.meteor_score import meteor_score

        if self.profile == "standard":
            ref, cand = ref.lower(), cand.lower()
        return meteor_score([wordpunct_tokenize(ref)], wordpunct_tokenize(cand))

    def rouge_l(self, ref: str, cand: str) -> float:
        s = self.rouge.score(ref, cand)["rougeL"]
        return s.fmeasure if self.profile == "standard" else s.recall

    def pair(self, ref: str, cand: str) -> tuple[tuple[float, ...], str | None]:
        """The engine's values in ``_OUTPUTS`` order and an error (None when fine)."""
        try:
            with warnings.catch_warnings():  # nltk warns on zero n-gram overlap; values unaffected
                warnings.simplefilter("ignore")
                b, b4 = self.bleus(ref, cand)
                return (float(b), float(b4), float(self.meteor(ref, cand)), float(self.rouge_l(ref, cand))), None
        except Exception as e:  # a library failing on one odd row is that row's error
            return _NAN, f"{type(e).__name__}: {e}"[:500]


class _Fast(_Plain):
    """The same library calls with caches passed through their public parameters."""

    def __init__(self, profile: str) -> None:
        super().__init__(profile)
        from nltk.corpus import wordnet
        from nltk.stem.porter import PorterStemmer
        from nltk.tokenize import wordpunct_tokenize
        from rouge_score.rouge_scorer import RougeScorer
        from rouge_score.tokenizers import DefaultTokenizer

        self.tok = lru_cache(maxsize=200_000)(lambda s: tuple(wordpunct_tokenize(s)))
        self.stemmer = _CachedStemmer(PorterStemmer())  # meteor_score's default stemmer, cached
        self.wordnet = _CachedWordNet(wordnet)
        self.rouge = RougeScorer(["rougeL"], tokenizer=_CachedTokenizer(DefaultTokenizer(use_stemmer=True)))

    def bleus(self, ref: str, cand: str) -> tuple[float, float]:
        from nltk.translate.bleu_score import sentence_bleu

        if self.profile == "standard":
            return super().bleus(ref, cand)
        b, b4 = sentence_bleu([ref], cand, weights=[W_BLEU, W_BLEU4])  # n-gram counts shared
        return b, b4

    def meteor(self, ref: str, cand: str) -> float:
        from nltk.translate.meteor_score import meteor_score

        if self.profile == "standard":
            ref, cand = ref.lower(), cand.lower()
        return meteor_score([list(self.tok(ref))], list(self.tok(cand)), stemmer=self.stemmer, wordnet=self.wordnet)


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


_WORKER: _Fast | None = None


def _init_worker(nltk_path: list[str]) -> None:
    import nltk

    nltk.data.path[:] = nltk_path


def _work(args: tuple[str, list[tuple[str, str]]]) -> list[tuple[tuple[float, ...], str | None]]:
    global _WORKER
    profile, pairs = args
    if _WORKER is None or _WORKER.profile != profile:
        _WORKER = _Fast(profile)
    return [_WORKER.pair(r, c) for r, c in pairs]


def _score_unique(profile: str, pairs: list[tuple[str, str]], workers: int) -> list[tuple[tuple[float, ...], str | None]]:
    if workers <= 1 or len(pairs) < PARALLEL_MIN:
        return _work((profile, pairs))
    import nltk

    ensure_wordnet()  # provision once here, not racing in every worker
    n_chunks = workers * 4
    size = -(-len(pairs) // n_chunks)
    chunks = [(profile, pairs[i:i + size]) for i in range(0, len(pairs), size)]
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
        got, lex_errors = _score_lexical(references, candidates, checks, profile, fast, workers)
        values.update({m: got[m] for m in lexical})
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
    if profile == "standard" and lexical:
        out.corpus["corpus_bleu"] = _corpus_bleu(references, candidates, lexical_errors)
    return out


def _join(a: str | None, b: str | None) -> str | None:
    return a if b is None else b if a is None else f"{a}; {b}"


def _score_lexical(references: Sequence[Any], candidates: Sequence[Any], checks: list[str | None], profile: str,
                   fast: bool, workers: int | None) -> tuple[dict[str, list[float]], list[str | None]]:
    """BLEU, BLEU-4, METEOR, ROUGE per row (documented values on checked-out rows) and library errors."""
    todo = [(r, c) for r, c, e in zip(references, candidates, checks) if e is None]
    if fast:
        unique = list(dict.fromkeys(todo))
        n = workers if workers is not None else min(os.cpu_count() or 1, 8)
        got = dict(zip(unique, _score_unique(profile, unique, n)))
        results = [got[p] for p in todo]
    else:
        plain = _Plain(profile)
        results = [plain.pair(r, c) for r, c in todo]
    values: dict[str, list[float]] = {m: [] for m in _OUTPUTS}
    errors: list[str | None] = []
    it = iter(results)
    for e in checks:
        vals, err = next(it) if e is None else ((_ZERO, None) if e == "" else (_NAN, None))
        for m, v in zip(_OUTPUTS, vals):
            values[m].append(v)
        errors.append(err)  # a library exception on a row (check errors are the caller's)
    return values, errors


def _corpus_bleu(refs: Sequence[Any], cands: Sequence[Any], errors: list[str | None]) -> float:
    import sacrebleu

    ok = [(r, c) for r, c, e in zip(refs, cands, errors) if e is None]
    if not ok:
        return math.nan
    bleu = sacrebleu.BLEU(tokenize="13a", smooth_method="exp")
    return bleu.corpus_score([c for _, c in ok], [[r for r, _ in ok]]).score / 100.0


def _info(profile: str, max_chars: int, metrics: Sequence[str]) -> dict[str, Any]:
    lexical = lexical_names(metrics)
    wordnet_version = None
    if lexical:
        from nltk.corpus import wordnet

        wordnet_version = f"WordNet {wordnet.get_version()}"
    defs = {m: metric_class(m)(m, profile).definition() for m in lexical}
    if lexical and profile == "standard":
        defs["corpus_bleu"] = CORPUS_BLEU
    return {"profile": profile, "metrics": list(metrics), "versions": library_versions(metrics),
            "wordnet": wordnet_version, "definitions": defs, "max_chars": max_chars,
            "empty_candidate": "0.0 in every metric", "bad_row": "NaN in every metric + error string"}
