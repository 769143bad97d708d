"""Free-form QA: the answer is compared with a reference answer by text metrics (the MusicQA papers' protocol)."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS, ProtocolKind


@KINDS.register("freeform")
class Freeform(ProtocolKind):
    scorer = "evalcore.scorers.freeform:FreeformScorer"
    text_metrics = True
    listening = ("bleu",)
    row_schema = {"required": ["reference"], "properties": {"reference": {"type": "string"}}}
    config_fields = {"metrics": "metrics applies to the freeform protocol only"}

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        if not isinstance(row.get("reference"), str):
            return "free-form item needs a reference answer (string)"
        return None
