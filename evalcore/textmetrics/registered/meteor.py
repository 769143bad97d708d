"""METEOR per pair with nltk and WordNet.

``mullama``: the MU-LLaMA evaluation script's ``meteor_score([wordpunct_tokenize(ref)], wordpunct_tokenize(cand))``
(nltk, its defaults: alpha 0.9, beta 3, gamma 0.5, Porter stems, WordNet synonyms). ``standard``: the same on the
lowercased texts. Computed here; the engine (:mod:`evalcore.textmetrics.text_profiles`) batches pairs and, when fast,
passes the same stemmer and WordNet with their lookups cached (``meteor_score``'s ``stemmer=`` and ``wordnet=``).
"""

from __future__ import annotations

from evalcore.textmetrics.freeform_metric import METRICS
from evalcore.textmetrics.text_profiles import LexicalMetric, PairTools
from evalcore.textmetrics.wordnet import check_wordnet, ensure_wordnet


@METRICS.register("meteor")
class Meteor(LexicalMetric):
    definitions = {
        "mullama": "nltk meteor_score([wordpunct_tokenize(ref)], wordpunct_tokenize(cand)), defaults",
        "standard": "nltk meteor_score on wordpunct tokens of the lowercased texts, defaults",
    }

    def problems(self) -> list[tuple[str, str]]:
        """WordNet found (or provisioned), not loaded: loading takes seconds."""
        try:
            check_wordnet()
        except Exception as e:  # WordNetUnavailable, with the fix in its message
            return [("names", f"{self.name}: {e}")]
        return []

    def setup(self) -> None:
        ensure_wordnet()

    def value(self, ref: str, cand: str, tools: PairTools) -> float:
        from nltk.translate.meteor_score import meteor_score

        if self.profile == "standard":
            ref, cand = ref.lower(), cand.lower()
        return meteor_score([tools.words(ref)], tools.words(cand), **tools.meteor_caches())
