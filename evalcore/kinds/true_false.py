"""True/false: the factual paper's yes/no question per label (a derived format of factual items)."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS
from evalcore.kinds.factual import DerivedFormat


@KINDS.register("true_false")
class TrueFalse(DerivedFormat):
    scorer = "evalcore.scorers.factual_formats:TrueFalseScorer"
    judge = "true_false"
    score_column, answered_column, card_metric = "correct_majority", "answered_majority", "accuracy_any"
    listening = ("accuracy_majority", "accuracy_any")
    row_schema = {"required": ["labels", "options"],
                  "properties": {"labels": {"enum": [["yes"], ["no"]]},
                                 "options": {"type": "array", "minItems": 1, "maxItems": 1}}}

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        if row.get("labels") not in (["yes"], ["no"]):
            return "true/false item needs labels ['yes'] or ['no']"
        if not row.get("options") or len(row["options"]) != 1:
            return "true/false item needs options = [the asked label]"
        return None
