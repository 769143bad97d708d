"""Multiple-choice QA: accuracy and instruction-following rate (share of parsable answers).

Where the judge follows a published rule, ``accuracy`` is the published verdict's and ``accuracy_strict`` evalcore's
strict reading's, with ``verdicts_differ`` counting the items where they differ (:mod:`evalcore.scorers.mcq_verdicts`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalcore.kinds.scorer import Scorer

from evalcore.scorers.mcq_breakdowns import breakdown_groups, chosen_type_rows
from evalcore.scorers.mcq_paraphrases import paraphrase_rows
from evalcore.scorers.mcq_orders import DEFINITIONS, accuracy_per_order, chosen_option
from evalcore.scorers.mcq_verdicts import (STRICT_COLUMN, Rules, differ_rows, has_strict, no_rules,
                                           published_aggregates, rule_of, strict_of, verdict)
from evalcore.scorers.perceptual_index import rul_rows
from evalcore.stats.aggregate import Aggregate, mean_of


class MCQScorer(Scorer):
    protocol = "mcq"
    #: the published rule of a row's judge (from its ``judge`` column), named in the figures' definitions: none known
    #: here; the scoring stage's MCQ scorer reads the judges' (:mod:`evalcore.scoring.mcq_rules`)
    rules: ClassVar[Rules] = staticmethod(no_rules)
    columns = ("correct", "answered")
    aggregates = (
        Aggregate("accuracy", ("correct",), mean_of(),
                  "share of questions answered correctly (mean over option orders, then items) over answered and "
                  "unanswered requests; unanswered = wrong; errored requests left out (see errored, "
                  "accuracy_with_errors)"),
        Aggregate("ifr", ("answered",), mean_of(), "instruction-following rate: share of responses parsed to an option"),
        Aggregate("consistency", ("consistent",), mean_of(), DEFINITIONS["consistency"]),
    )
    with_errors = (
        Aggregate("accuracy_with_errors", ("correct",), mean_of(),
                  "share of questions answered correctly (mean over option orders, then items), counting every "
                  "errored request of the cell as wrong; unanswered = wrong"),
    )

    def aggregates_of(self, df: pd.DataFrame) -> tuple[Aggregate, ...]:
        """:attr:`aggregates`; rows of a published rule's judge: ``accuracy`` named by the rule, and beside it
        ``accuracy_strict``."""
        return published_aggregates(self.aggregates, rule_of(df, self.rules)) if has_strict(df) else self.aggregates

    def with_errors_of(self, df: pd.DataFrame) -> tuple[Aggregate, ...]:
        """:attr:`with_errors`; rows of a published rule's judge: with ``accuracy_strict_with_errors`` too."""
        return published_aggregates(self.with_errors, rule_of(df, self.rules)) if has_strict(df) else self.with_errors

    def error_fill(self, row: dict[str, Any]) -> dict[str, float]:
        """An errored request is a wrong answer (by either verdict)."""
        return {"correct": 0.0, "answered": 0.0, STRICT_COLUMN: 0.0}

    def item_stats(self, df: pd.DataFrame, columns: list[str], unit: str = "item_id") -> pd.DataFrame:
        """Adds ``consistent``: the same option text chosen, and answered, in every order of the item."""
        if STRICT_COLUMN in columns:  # a row judged before the published verdict was added: its one verdict
            df = df.assign(**{STRICT_COLUMN: strict_of(df)})
        stats = super().item_stats(df, [c for c in columns if c != "consistent"], unit)
        if "consistent" in columns:
            chosen = pd.Series([chosen_option(list(o), -1 if p is None or p != p else int(p))
                                for o, p in zip(df["options"], df["parsed_index"])], index=df.index)
            g = chosen.groupby(df[unit], sort=True)
            stats["consistent"] = g.agg(lambda s: float(s.notna().all() and s.nunique() == 1))
        return stats[columns]

    def spread_rows(self, df: pd.DataFrame) -> list[dict[str, Any]]:
        """``accuracy_sd``: sample SD of the per-order accuracies (value only, no CI); under a published rule,
        ``verdicts_differ`` too (items whose published and strict verdicts differ)."""
        per_order = accuracy_per_order(df.rename(columns={"option_order": "order_id"}))["accuracy"].to_numpy()
        sd = float(np.std(per_order, ddof=1)) if len(per_order) > 1 else float("nan")
        return [{"metric": "accuracy_sd", "value": sd, "ci_low": float("nan"), "ci_high": float("nan"),
                 "n": int(df["item_id"].nunique()), "definition": DEFINITIONS["accuracy_sd"]},
                *differ_rows(df, self.rules)]

    def breakdown_groups(self, df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
        """Summary groups beyond ``all``/``task=``: category, secondary category, difficulty,
        knowledge/reasoning dimension, genre (:mod:`evalcore.scorers.mcq_breakdowns`)."""
        return breakdown_groups(df)

    def extra_rows(self, df: pd.DataFrame, *, resamples: int, confidence: float, seed: int) -> list[dict[str, Any]]:
        """``chosen_share`` rows: which option type (correct / distractor type / none) the answers chose; for
        RUL-MuchoMusic items, parse failures, the leave-one-out vote and the Perceptual Index (``perceptual_index``);
        with paraphrase conditions, consistency across paraphrases and orders (``paraphrase_consistency``)."""
        return (chosen_type_rows(df, resamples=resamples, confidence=confidence, seed=seed)
                + rul_rows(df, resamples=resamples, confidence=confidence, seed=seed)  # RUL-MuchoMusic items only
                + paraphrase_rows(df, resamples=resamples, confidence=confidence, seed=seed))  # paraphrase_<j> only

    def score(self, rows: list[dict[str, Any]]) -> list[dict[str, float]]:
        """``correct`` (the published verdict where the judge credits options, else the option named),
        ``answered`` (an option named: the strict reading) and, under a published rule, ``correct_strict``."""
        out = []
        for r in rows:
            parsed = r.get("parsed_index")
            parsed = -1 if parsed is None else parsed
            out.append({**verdict(parsed, r.get("credited"), r.get("correct_index")),
                        "answered": float(parsed >= 0)})
        return out
