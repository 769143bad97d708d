"""Factual QA: labels read from the answer into a closed vocabulary, scored by precision, recall and F1."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS, ProtocolKind


@KINDS.register("factual")
class Factual(ProtocolKind):
    scorer = "evalcore.scorers.factual:FactualScorer"
    judge = "lexicon"
    vocabulary = True
    labels_in_vocabulary = True
    outcome, score_column, card_metric = "labels", "f1", "f1_micro"
    listening = ("f1_micro", "f1_macro")
    shown_columns = ("precision", "recall", "f1")
    row_schema = {"required": ["labels"], "properties": {"labels": {"type": "array", "minItems": 1}}}

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        if row.get("labels") is None:
            return "factual item needs labels (a list of strings)"
        if not row["labels"]:
            return "field 'labels' is empty: a factual item needs at least one label"
        return None


class DerivedFormat(ProtocolKind):
    """What the factual paper's derived formats of factual items share (binary choice, true/false): the item's
    question is the whole prompt (:mod:`evalcore.protocols.factual_prompts`), its options are shown as the item
    gives them, the answer picks one of them and is read into the vocabulary's labels."""

    vocabulary = True
    options = "fixed"
    outcome = "choice"
