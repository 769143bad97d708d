"""ROUGE-L per pair with rouge-score (a lexical metric of :mod:`evalcore.metrics.text_profiles`)."""

from __future__ import annotations

from evalcore.metrics.freeform_metric import METRICS
from evalcore.metrics.text_profiles import LexicalMetric


@METRICS.register("rouge")
class Rouge(LexicalMetric):
    definitions = {
        "mullama": "rouge-score ROUGE-L recall, use_stemmer=True",
        "standard": "rouge-score ROUGE-L F-measure, use_stemmer=True",
    }
