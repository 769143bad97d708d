"""A toy free-form metric, registered here and nowhere else: the proof that a metric is one file plus its
registration (tests/test_metric_registry.py imports it; ``evalcore.metrics`` does not, so no run lists it unless
its process imports this module). Word recall: the share of the reference's distinct words (of at least
``min_length`` characters) that the answer contains.

It lives in the package, not in tests/, because a run's Ray workers unpickle the config they are handed, and
with it this module's settings class: they import it by its module path."""

from __future__ import annotations

import re
from typing import Any, Hashable, Sequence

from pydantic import Field

from evalcore.metrics.freeform_metric import FreeformMetric, MetricParams, Scored, scoreable, spread
from evalcore.registry import METRICS

WORD = re.compile(r"\w+")


class ToyRecallParams(MetricParams):
    lowercase: bool = True
    min_length: int = Field(1, ge=1)


@METRICS.register("toy_recall")
class ToyRecall(FreeformMetric):
    Params = ToyRecallParams
    section = "toy_recall"

    def _words(self, text: str) -> set[str]:
        p = self.params or ToyRecallParams()
        return {w for w in WORD.findall(text.lower() if p.lowercase else text) if len(w) >= p.min_length}

    def definition(self) -> str:
        p = self.params or ToyRecallParams()
        return f"toy word recall: share of the reference's distinct \\w+ words (lowercase={p.lowercase}, " \
               f"min_length={p.min_length}) found in the answer"

    def score(self, references: Sequence[Any], candidates: Sequence[Any], checks: Sequence[str | None],
              corpora: Sequence[Hashable] | None, loaded: dict) -> Scored:
        rows = scoreable(checks)
        vals = []
        for i in rows:
            ref = self._words(references[i])
            vals.append(len(ref & self._words(candidates[i])) / len(ref) if ref else 0.0)
        values, errors = spread(checks, rows, vals, [None] * len(rows))
        return values, errors, {"definition": self.definition()}
