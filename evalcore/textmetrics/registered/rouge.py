"""ROUGE-L per pair with rouge-score.

``mullama``: the MU-LLaMA evaluation script's ROUGE-L **recall** (``RougeScorer(["rougeL"], use_stemmer=True)``);
``standard``: its F-measure. Computed here; the engine (:mod:`evalcore.textmetrics.text_profiles`) batches pairs and,
when fast, caches the scorer's tokenisations (rouge-score's own tokenizer with the stemmer, passed as
``tokenizer=``: what ``use_stemmer=True`` builds).
"""

from __future__ import annotations

from evalcore.textmetrics.freeform_metric import METRICS
from evalcore.textmetrics.text_profiles import LexicalMetric, PairTools


@METRICS.register("rouge")
class Rouge(LexicalMetric):
    definitions = {
        "mullama": "rouge-score ROUGE-L recall, use_stemmer=True",
        "standard": "rouge-score ROUGE-L F-measure, use_stemmer=True",
    }

    def value(self, ref: str, cand: str, tools: PairTools) -> float:
        def build():
            from rouge_score.rouge_scorer import RougeScorer
            from rouge_score.tokenizers import DefaultTokenizer

            return RougeScorer(["rougeL"], tokenizer=tools.tokenizer(DefaultTokenizer(use_stemmer=True)))

        s = tools.once("rougeL", build).score(ref, cand)["rougeL"]
        return s.fmeasure if self.profile == "standard" else s.recall
