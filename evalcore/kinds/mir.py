"""MIR tasks in CMI-Bench's released layout: each item names its released scoring rule (``category``)."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS, ProtocolKind


@KINDS.register("mir")
class Mir(ProtocolKind):
    # a benchmark's released format: the released instruction is the whole prompt
    scorer = "evalcore.scorers.mir:MirScorer"
    released_rules = True
    # CMI-Bench's figures, each higher-is-better (lyrics: word_accuracy = 1 − WER); a dataset holds one task family
    listening = ("accuracy", "key_weighted_score", "f_measure", "word_accuracy", "melody_accuracy", "frame_f1_micro",
                 "r2", "roc_auc")
    row_schema = {"required": ["reference", "category"],
                  "properties": {"reference": {"type": "string"}, "category": {"type": "string"}}}
    config_fields = {"similarity": "similarity applies to the mir protocol only (an MCQ judge takes its own, in its "
                                   "params)"}

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        if not (isinstance(row.get("reference"), str) and isinstance(row.get("category"), str)):
            return "MIR item needs a reference answer (string) and its scoring rule in category (string)"
        return None
