"""A toy protocol kind, an example that only its test imports (tests/test_kinds.py): exact-match QA. An answer is
right when it equals the item's reference, case and surrounding spaces aside. One module holds the whole kind: what
its items need, its prompt, how the browser reads it, and its scorer."""

from __future__ import annotations

from typing import Any

from evalcore.kinds.base import KINDS, ProtocolKind
from evalcore.kinds.scorer import Scorer
from evalcore.stats.aggregate import Aggregate, mean_of


@KINDS.register("toy_exact")
class ToyExact(ProtocolKind):
    scorer = f"{__name__}:ExactScorer"
    variants = {"default": "{question} Answer in one word."}
    row_schema = {"required": ["reference"], "properties": {"reference": {"type": "string", "minLength": 1}}}
    outcome, score_column, answered_column, card_metric = "choice", "exact", "answered", "exact_match"
    listening = ("exact_match",)

    @classmethod
    def check_row(cls, row: dict[str, Any]) -> str | None:
        if not isinstance(row.get("reference"), str) or not row["reference"].strip():
            return "exact-match item needs a reference answer (a non-empty string)"
        return None


def _norm(text: Any) -> str:
    return " ".join(str(text or "").split()).casefold()


class ExactScorer(Scorer):
    """1 per answer equal to the reference (case and spaces aside), else 0; ``answered`` 0 for an empty answer."""

    protocol = ToyExact.name
    columns = ("exact", "answered")
    aggregates = (Aggregate("exact_match", ("exact",), mean_of(0),
                            "share of answers equal to the reference, case and surrounding spaces aside "
                            "(evalcore's toy exact-match kind)"),)

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        return [{"exact": float(bool(_norm(r.get("text"))) and _norm(r.get("text")) == _norm(r.get("reference"))),
                 "answered": float(bool(_norm(r.get("text"))))} for r in rows]
