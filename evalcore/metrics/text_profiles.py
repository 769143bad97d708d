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
from typing import Any, Sequence

PROFILES = ("mullama", "standard")
METRICS = ("bleu", "bleu4", "meteor", "rouge")
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


def library_versions() -> dict[str, str]:
    """Versions of the libraries the metrics come from."""
    return {p: version(p) for p in ("nltk", "rouge-score", "sacrebleu")}


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
) -> PairScores:
    """Score candidate/reference pairs with ``profile``; see the module docstring for row rules."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {PROFILES}")
    if len(references) != len(candidates):
        raise ValueError(f"{len(references)} references but {len(candidates)} candidates")
    checks = [check_pair(r, c, max_chars) for r, c in zip(references, candidates)]
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
        vals, err = next(it) if e is None else ((_ZERO, None) if e == "" else (_NAN, e))
        for m, v in zip(METRICS, vals):
            values[m].append(v)
        errors.append(err)
    out = PairScores(profile, values, errors, info=_info(profile, max_chars))
    if profile == "standard":
        out.corpus["corpus_bleu"] = _corpus_bleu(references, candidates, errors)
    return out


def _corpus_bleu(refs: Sequence[Any], cands: Sequence[Any], errors: list[str | None]) -> float:
    import sacrebleu

    ok = [(r, c) for r, c, e in zip(refs, cands, errors) if e is None]
    if not ok:
        return math.nan
    bleu = sacrebleu.BLEU(tokenize="13a", smooth_method="exp")
    return bleu.corpus_score([c for _, c in ok], [[r for r, _ in ok]]).score / 100.0


def _info(profile: str, max_chars: int) -> dict[str, Any]:
    from nltk.corpus import wordnet

    return {"profile": profile, "versions": library_versions(), "wordnet": f"WordNet {wordnet.get_version()}",
            "definitions": DEFINITIONS[profile], "max_chars": max_chars,
            "empty_candidate": "0.0 in every metric", "bad_row": "NaN in every metric + error string"}
