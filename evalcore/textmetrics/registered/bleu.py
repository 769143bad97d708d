"""BLEU per pair.

``mullama``: the MU-LLaMA evaluation script's ``sentence_bleu([ref], cand)`` (nltk) on the raw strings: nltk then
counts character n-grams, with its default weights (0.25 ×4) and no smoothing. ``standard``: sacreBLEU's sentence
BLEU (13a tokenizer, ``exp`` smoothing, effective order) over 100, and beside it, as an aggregate, sacreBLEU's
corpus BLEU over the pairs scored without error (``corpus_bleu``). Computed here; the engine
(:mod:`evalcore.textmetrics.text_profiles`) batches pairs, and shares one nltk call with BLEU-4 when both are scored.
"""

from __future__ import annotations

import math
from typing import Any, Callable, ClassVar, Sequence

from evalcore.textmetrics.freeform_metric import METRICS
from evalcore.textmetrics.text_profiles import LexicalMetric, PairTools

#: nltk's default weights: 1- to 4-gram precisions, equally
WEIGHTS = (0.25, 0.25, 0.25, 0.25)
#: the standard profile's corpus aggregate (not a per-pair value)
CORPUS_BLEU = "sacrebleu corpus BLEU/100 over scored rows, tokenize=13a, smooth=exp"


class SentenceBleu(LexicalMetric):
    """A sentence BLEU of one pair: nltk's with :attr:`weights` (``mullama``), or sacreBLEU's scorer that
    :attr:`sacrebleu` builds, over 100 (``standard``). BLEU and BLEU-4 are this with their own weights and scorer."""

    weights: ClassVar[tuple[float, ...]]
    sacrebleu: ClassVar[Callable[[], Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.nltk_bleu_weights = {"mullama": cls.weights}  # the engine's one shared nltk call (text_profiles)

    def value(self, ref: str, cand: str, tools: PairTools) -> float:
        if self.profile == "standard":
            bleu = tools.once(f"sacrebleu {self.name}", type(self).sacrebleu)
            return bleu.sentence_score(cand, [ref]).score / 100.0
        return tools.sentence_bleu(ref, cand, self.weights)


def _sacrebleu():
    import sacrebleu

    return sacrebleu.BLEU(tokenize="13a", smooth_method="exp", effective_order=True)


@METRICS.register("bleu")
class Bleu(SentenceBleu):
    definitions = {
        "mullama": "nltk sentence_bleu([ref], cand) on raw strings (character n-grams), weights 0.25x4, no smoothing",
        "standard": "sacrebleu sentence BLEU/100, tokenize=13a, smooth=exp, effective_order=True",
    }
    weights, sacrebleu = WEIGHTS, staticmethod(_sacrebleu)

    def aggregate_definitions(self) -> dict[str, str]:
        return {"corpus_bleu": CORPUS_BLEU} if self.profile == "standard" else {}

    def aggregates(self, pairs: Sequence[tuple[str, str]]) -> dict[str, float]:
        if self.profile != "standard":
            return {}
        if not pairs:
            return {"corpus_bleu": math.nan}
        import sacrebleu

        bleu = sacrebleu.BLEU(tokenize="13a", smooth_method="exp")
        return {"corpus_bleu": bleu.corpus_score([c for _, c in pairs], [[r for r, _ in pairs]]).score / 100.0}
