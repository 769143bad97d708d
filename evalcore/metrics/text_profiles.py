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

Model-based metrics (``metrics=`` any of ``MODEL_METRICS``, models configured by :class:`ModelMetrics`):
``bertscore`` (:mod:`evalcore.metrics.bertscore`: recall in ``mullama``, F1 rescaled where a baseline
exists in ``standard``), ``cider`` (:mod:`evalcore.metrics.cider`: pycocoevalcap CIDEr-D with the PTB
tokenizer in both profiles; IDF per corpus = rows sharing a ``corpora`` label) and ``claptext``
(:mod:`evalcore.metrics.clap_text`, both profiles). They follow the same row rules (an empty candidate
scores 0.0; for CIDEr it stays in its corpus, where pycocoevalcap also gives it 0); a metric failing
on rows gives NaN in that metric and its message in the row's error.

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
from typing import TYPE_CHECKING, Any, Hashable, Sequence

if TYPE_CHECKING:
    from evalcore.metrics.bertscore import BertScoreConfig
    from evalcore.metrics.clap_text import ClapTextConfig

PROFILES = ("mullama", "standard")
METRICS = ("bleu", "bleu4", "meteor", "rouge")
MODEL_METRICS = ("bertscore", "cider", "claptext")
ALL_METRICS = METRICS + MODEL_METRICS
MAX_CHARS = 50_000
PARALLEL_MIN = 2000  # fewer distinct pairs than this are scored in-process
W_BLEU = (0.25, 0.25, 0.25, 0.25)
W_BLEU4 = (0.0, 0.0, 0.0, 1.0)
_NAN = (math.nan,) * len(METRICS)
_ZERO = (0.0,) * len(METRICS)

DEFINITIONS = {
    "mullama": {
        "bleu": "nltk sentence_bleu([ref], cand) on raw strings (character n-grams), weights 0.25x4, no smoothing",
        "bleu4": "nltk sentence_bleu([ref], cand) on raw strings, weights (0, 0, 0, 1), no smoothing",
        "meteor": "nltk meteor_score([wordpunct_tokenize(ref)], wordpunct_tokenize(cand)), defaults",
        "rouge": "rouge-score ROUGE-L recall, use_stemmer=True",
    },
    "standard": {
        "bleu": "sacrebleu sentence BLEU/100, tokenize=13a, smooth=exp, effective_order=True",
        "bleu4": "sacrebleu sentence BLEU-4/100, tokenize=13a, smooth=none, effective_order=False",
        "meteor": "nltk meteor_score on wordpunct tokens of the lowercased texts, defaults",
        "rouge": "rouge-score ROUGE-L F-measure, use_stemmer=True",
        "corpus_bleu": "sacrebleu corpus BLEU/100 over scored rows, tokenize=13a, smooth=exp",
    },
}


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
    """Models for the model-based metrics (required only for the metrics asked for)."""

    bertscore: BertScoreConfig | None = None
    clap: ClapTextConfig | None = None
    clap_ray_actors: int = 0  # > 0: CLAP embeddings on that many Ray actors
    #: the models once loaded (BERTScorer per profile, the CLAP text embedder), kept for the next call
    loaded: dict = field(default_factory=dict, compare=False, repr=False)


def library_versions(metrics: Sequence[str] = METRICS) -> dict[str, str]:
    """Versions of the libraries the metrics come from."""
    names = ["nltk", "rouge-score", "sacrebleu"] if any(m in METRICS for m in metrics) else []
    if "bertscore" in metrics:
        names += ["bert-score", "torch", "transformers"]
    if "cider" in metrics:
        names += ["pycocoevalcap"]
    if "claptext" in metrics:
        names += ["torch", "transformers"]
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

        from evalcore.metrics.wordnet import ensure_wordnet

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
        """Metric values in ``METRICS`` order and an error (None when fine)."""
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

    from evalcore.metrics.wordnet import ensure_wordnet

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

    ``metrics`` defaults to the lexical ``METRICS``; ``corpora`` labels rows sharing CIDEr's IDF.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {PROFILES}")
    if len(references) != len(candidates):
        raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
    wanted = list(METRICS if metrics is None else metrics)
    unknown = [m for m in wanted if m not in ALL_METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; one of {ALL_METRICS}")
    checks = [check_pair(r, c, max_chars) for r, c in zip(references, candidates)]
    values: dict[str, list[float]] = {}
    errors: list[str | None] = [None if e in (None, "") else e for e in checks]
    if any(m in METRICS for m in wanted):
        lexical, lex_errors = _score_lexical(references, candidates, checks, profile, fast, workers)
        values.update({m: lexical[m] for m in METRICS if m in wanted})
        errors = [_join(a, b) for a, b in zip(errors, lex_errors)]
    lexical_errors = list(errors)
    info = _info(profile, max_chars, wanted)
    for m in (m for m in MODEL_METRICS if m in wanted):
        vals, errs, meta = _score_model(m, references, candidates, checks, profile, models or ModelMetrics(), corpora)
        values[m] = vals
        errors = [_join(a, b) for a, b in zip(errors, errs)]
        info["definitions"][m] = meta.pop("definition")
        info.setdefault("models", {})[m] = meta
    out = PairScores(profile, values, errors, info=info)
    if profile == "standard" and any(m in METRICS for m in wanted):
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
    values: dict[str, list[float]] = {m: [] for m in METRICS}
    errors: list[str | None] = []
    it = iter(results)
    for e in checks:
        vals, err = next(it) if e is None else ((_ZERO, None) if e == "" else (_NAN, None))
        for m, v in zip(METRICS, vals):
            values[m].append(v)
        errors.append(err)  # a library exception on a row (check errors are the caller's)
    return values, errors


def _score_model(metric: str, references: Sequence[Any], candidates: Sequence[Any], checks: list[str | None],
                 profile: str, models: ModelMetrics, corpora: Sequence[Hashable] | None
                 ) -> tuple[list[float], list[str | None], dict[str, Any]]:
    """(values, per-row errors, provenance incl. ``definition``) of one model-based metric."""
    n = len(checks)
    values = [math.nan if e not in (None, "") else 0.0 for e in checks]
    errors: list[str | None] = [None] * n
    rows = [i for i, e in enumerate(checks) if e is None]
    if metric == "cider":
        from evalcore.metrics import cider

        rows = [i for i, e in enumerate(checks) if e in (None, "")]  # an empty candidate stays in its corpus
        labels = [corpora[i] for i in rows] if corpora is not None else None
        vals, errs = cider.cider_scores([references[i] for i in rows], [candidates[i] for i in rows], labels)
        meta = {"definition": cider.definition(), "corpora": "rows sharing a label" if corpora is not None else "all rows"}
    elif metric == "bertscore":
        from evalcore.metrics import bertscore

        if models.bertscore is None:
            raise ValueError("bertscore needs a BertScoreConfig (a local model directory)")
        scorer = models.loaded.get(("bertscore", profile))
        if scorer is None:
            scorer = models.loaded[("bertscore", profile)] = bertscore.BertScore(models.bertscore, profile)
        meta = {"definition": bertscore.definition(models.bertscore, profile), "path": models.bertscore.model,
                "model_id": models.bertscore.name, "num_layers": models.bertscore.layers(),
                "rescaled": scorer.rescale, "config": bertscore.model_info(models.bertscore)}
        vals, errs = _guarded(metric, len(rows), lambda: scorer.score([references[i] for i in rows],
                                                                      [candidates[i] for i in rows]))
    else:
        from evalcore.metrics import clap_text

        if models.clap is None:
            raise ValueError("claptext needs a ClapTextConfig (laion checkpoint and tokenizer paths)")
        cfg = models.clap
        embedder = models.loaded.get("claptext")
        if embedder is None and models.clap_ray_actors <= 0:
            embedder = models.loaded["claptext"] = clap_text.ClapTextEmbedder(cfg)
        stats: dict[str, Any] = {}

        def run() -> list[float]:
            texts = [references[i] for i in rows] + [candidates[i] for i in rows]
            emb, st = clap_text.embed_texts(texts, cfg, ray_actors=models.clap_ray_actors, embedder=embedder)
            stats.update(st)
            return [clap_text.cosine(emb[candidates[i]], emb[references[i]]) for i in rows]

        vals, errs = _guarded(metric, len(rows), run)
        meta = {"definition": clap_text.definition(cfg), **clap_text.describe(cfg), "embedding": stats}
    for i, v, e in zip(rows, vals, errs):
        values[i], errors[i] = (math.nan, e) if e else (v, None)
    return values, errors, meta


def _guarded(metric: str, n: int, fn: Any) -> tuple[list[float], list[str | None]]:
    """``fn()``'s values with no errors, or NaN and the exception as every row's error."""
    try:
        return fn(), [None] * n
    except Exception as e:  # a whole-metric failure (e.g. a Ray actor died) becomes every row's error
        return [math.nan] * n, [f"{metric}: {type(e).__name__}: {e}"[:300]] * n


def _corpus_bleu(refs: Sequence[Any], cands: Sequence[Any], errors: list[str | None]) -> float:
    import sacrebleu

    ok = [(r, c) for r, c, e in zip(refs, cands, errors) if e is None]
    if not ok:
        return math.nan
    bleu = sacrebleu.BLEU(tokenize="13a", smooth_method="exp")
    return bleu.corpus_score([c for _, c in ok], [[r for r, _ in ok]]).score / 100.0


def _info(profile: str, max_chars: int, metrics: Sequence[str] = METRICS) -> dict[str, Any]:
    lexical = any(m in METRICS for m in metrics)
    wordnet_version = None
    if lexical:
        from nltk.corpus import wordnet

        wordnet_version = f"WordNet {wordnet.get_version()}"
    defs = {k: v for k, v in DEFINITIONS[profile].items() if lexical and (k in metrics or k == "corpus_bleu")}
    return {"profile": profile, "metrics": list(metrics), "versions": library_versions(metrics),
            "wordnet": wordnet_version, "definitions": defs, "max_chars": max_chars,
            "empty_candidate": "0.0 in every metric", "bad_row": "NaN in every metric + error string"}
