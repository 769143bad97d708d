"""Multiple-choice QA: options shown in shuffled orders, the answer matched to one of them; accuracy ± SD over the
orders, consistency, instruction following."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS, ProtocolKind

MOST_OPTIONS = 26  #: options are lettered A–Z


def choice_problem(row: dict[str, Any]) -> str | None:
    """The reason a multiple-choice row's options or correct option are unusable, or None (``correct_option`` was
    checked to be None or an index 0..25 before)."""
    opts, ci = row.get("options"), row.get("correct_option")
    if not opts or len(opts) < 2:
        return "multiple-choice item needs at least 2 options"
    if len(opts) > MOST_OPTIONS:
        return f"multiple-choice item has more than {MOST_OPTIONS} options"
    if isinstance(ci, bool) or not isinstance(ci, int) or not 0 <= ci < len(opts):
        return f"field 'correct_option' must be an index into options (0..{len(opts) - 1}), got {ci!r}"
    if len(set(opts)) != len(opts):
        return "options must be distinct"
    return None


ICL = "templates and icl_examples apply to the mcq protocol only"


@KINDS.register("mcq")
class MCQ(ProtocolKind):
    scorer = "evalcore.scoring.mcq_rules:MCQScorer"
    judge = "mcq_string"
    options = "shuffled"
    in_context = True
    outcome, score_column, answered_column, card_metric = "choice", "correct", "answered", "accuracy"
    listening = ("accuracy", "consistency")
    # a plain form after MuChoMusic's (one option a line); the released MuChoMusic prompt is `templates: muchomusic`
    variants = {"default": "Question: {question}\nOptions:\n{options}\nThe correct answer is:"}
    row_schema = {"required": ["options"],
                  "properties": {"options": {"type": "array", "minItems": 2, "maxItems": MOST_OPTIONS}}}
    needs_correct_option = True
    config_fields = {"templates": ICL, "icl_examples": ICL,
                     "breakdown_min_share": "breakdown_min_share applies to the mcq protocol only"}

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        return choice_problem(row)
