"""BLEU per pair (a lexical metric of the profile engine, :mod:`evalcore.metrics.text_profiles`)."""

from __future__ import annotations

from evalcore.metrics.freeform_metric import METRICS
from evalcore.metrics.text_profiles import LexicalMetric


@METRICS.register("bleu")
class Bleu(LexicalMetric):
    definitions = {
        "mullama": "nltk sentence_bleu([ref], cand) on raw strings (character n-grams), weights 0.25x4, no smoothing",
        "standard": "sacrebleu sentence BLEU/100, tokenize=13a, smooth=exp, effective_order=True",
    }
