"""BLEU-4 (4-gram precision only) per pair.

``mullama``: the MU-LLaMA evaluation script's ``sentence_bleu([ref], cand, weights=(0, 0, 0, 1))`` (nltk) on the
raw strings, no smoothing. ``standard``: sacreBLEU's sentence BLEU with full order 4 (13a tokenizer, no smoothing,
``effective_order=False``: zero without a 4-gram match) over 100; sacreBLEU's per-sentence advice to enable
effective order is dropped from its log (it is off on purpose). Computed here; the engine
(:mod:`evalcore.textmetrics.text_profiles`) batches pairs, and shares one nltk call with BLEU when both are scored.
"""

from __future__ import annotations

import logging

from evalcore.textmetrics.freeform_metric import METRICS
from evalcore.textmetrics.registered.bleu import SentenceBleu

#: the 4-gram precision alone
WEIGHTS = (0.0, 0.0, 0.0, 1.0)


def _quiet_effective_order(record: logging.LogRecord) -> bool:
    """Drop sacreBLEU's per-sentence advice to enable effective_order (BLEU-4 disables it on purpose)."""
    return "effective_order" not in record.getMessage()


def _sacrebleu4():
    import sacrebleu

    logging.getLogger("sacrebleu").addFilter(_quiet_effective_order)
    return sacrebleu.BLEU(tokenize="13a", smooth_method="none", effective_order=False)


@METRICS.register("bleu4")
class Bleu4(SentenceBleu):
    definitions = {
        "mullama": "nltk sentence_bleu([ref], cand) on raw strings, weights (0, 0, 0, 1), no smoothing",
        "standard": "sacrebleu sentence BLEU-4/100, tokenize=13a, smooth=none, effective_order=False",
    }
    weights, sacrebleu = WEIGHTS, staticmethod(_sacrebleu4)
