"""METEOR per pair with nltk and WordNet (a lexical metric of :mod:`evalcore.metrics.text_profiles`)."""

from __future__ import annotations

from evalcore.metrics.freeform_metric import METRICS
from evalcore.metrics.text_profiles import LexicalMetric
from evalcore.metrics.wordnet import check_wordnet


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
