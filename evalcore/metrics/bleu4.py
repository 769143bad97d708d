"""BLEU-4 (4-gram precision only) per pair (a lexical metric of :mod:`evalcore.metrics.text_profiles`)."""

from __future__ import annotations

from evalcore.metrics.freeform_metric import METRICS
from evalcore.metrics.text_profiles import LexicalMetric


@METRICS.register("bleu4")
class Bleu4(LexicalMetric):
    definitions = {
        "mullama": "nltk sentence_bleu([ref], cand) on raw strings, weights (0, 0, 0, 1), no smoothing",
        "standard": "sacrebleu sentence BLEU-4/100, tokenize=13a, smooth=none, effective_order=False",
    }
