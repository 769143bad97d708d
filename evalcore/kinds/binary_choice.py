"""Binary choice: the factual paper's two-option question (a present label and an absent one), scored by the P/R/F1
of the labels the answer names."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS
from evalcore.kinds.factual import DerivedFormat
from evalcore.kinds.mcq import choice_problem


@KINDS.register("binary_choice")
class BinaryChoice(DerivedFormat):
    scorer = "evalcore.scorers.factual_formats:BinaryChoiceScorer"
    judge = "binary_choice"
    score_column, answered_column, card_metric = "correct", "answered", "f1_micro"
    listening = ("accuracy", "f1_micro")
    shown_columns = ("precision", "recall", "f1")
    row_schema = {"required": ["options"], "properties": {"options": {"type": "array", "minItems": 2, "maxItems": 2}}}
    needs_correct_option = True

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        if len(row.get("options") or ()) != 2:
            return "binary-choice item needs exactly 2 options"
        return choice_problem(row)
