"""A toy free-form metric, registered here and named nowhere else: the proof that a metric is one file plus its
registration (tests/test_metric_registry.py), and the file to copy for a new one (docs/freeform.md). Word recall:
the share of the reference's distinct words (of at least ``min_length`` characters) that the answer contains.
It is no default metric: a run scores it only where a protocol's ``metrics.names`` lists it."""

from __future__ import annotations

import re
from typing import Any, Hashable, Sequence

from pydantic import Field

from evalcore.textmetrics.freeform_metric import METRICS, FreeformMetric, MetricParams, Scored, scoreable, spread

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
