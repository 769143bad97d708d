"""Multiple-choice QA: accuracy and instruction-following rate (share of parsable answers)."""

from __future__ import annotations

from typing import Any

from evalcore.metrics.base import Aggregate, Scorer, mean_of


class MCQScorer(Scorer):
    protocol = "mcq"
    columns = ("correct", "answered")
    aggregates = (
        Aggregate("accuracy", ("correct",), mean_of(),
                  "share of questions answered correctly (mean over option orders, then items); unanswered = wrong"),
        Aggregate("ifr", ("answered",), mean_of(), "instruction-following rate: share of responses parsed to an option"),
    )

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        out = []
        for r in rows:
            parsed = r.get("parsed_index")
            parsed = -1 if parsed is None else parsed
            out.append({"correct": float(parsed >= 0 and parsed == r.get("correct_index")),
                        "answered": float(parsed >= 0)})
        return out
