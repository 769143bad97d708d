"""Free-form QA: per-pair text similarity to the reference answer (sacreBLEU sentence BLEU and chrF)."""

from __future__ import annotations

from typing import Any

import sacrebleu

from evalcore.metrics.base import Aggregate, Scorer, mean_of

_V = f"sacrebleu {sacrebleu.__version__}"


class FreeformScorer(Scorer):
    protocol = "freeform"
    columns = ("bleu", "chrf")
    aggregates = (
        Aggregate("bleu", ("bleu",), mean_of(), f"mean sentence BLEU/100 ({_V}, 13a tokenizer, exp smoothing)"),
        Aggregate("chrf", ("chrf",), mean_of(), f"mean sentence chrF/100 ({_V}, char order 6, beta 2)"),
    )

    def __init__(self) -> None:
        self._bleu = sacrebleu.BLEU(effective_order=True)
        self._chrf = sacrebleu.CHRF()

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        out = []
        for r in rows:
            cand, ref = r.get("text") or "", [r.get("reference") or ""]
            out.append({"bleu": self._bleu.sentence_score(cand, ref).score / 100.0,
                        "chrf": self._chrf.sentence_score(cand, ref).score / 100.0})
        return out
