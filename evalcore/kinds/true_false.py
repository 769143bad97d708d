"""True/false: the factual paper's yes/no question per label (a derived format of factual items)."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS, ProtocolKind


@KINDS.register("true_false")
class TrueFalse(ProtocolKind):
    # a derived factual format: the item's question is the whole prompt (evalcore.protocols.factual_prompts)
    scorer = "evalcore.scorers.factual_formats:TrueFalseScorer"
    judge = "true_false"
    vocabulary = True
    options = "fixed"
    outcome, score_column, answered_column = "choice", "correct_majority", "answered_majority"
    card_metric = "accuracy_any"
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
