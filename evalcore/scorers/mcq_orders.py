"""Multiple-choice metrics over shuffled option orders: accuracy per order, its mean and SD,
consistency across orders, instruction-following rate (IFR) and parser agreement.

Pure functions over a DataFrame with one row per response and the columns ``question_id``,
``order_id``, ``parsed_index`` (-1 = unanswered), ``correct`` (bool), ``options`` (the option
texts in presented order; needed for consistency) plus any group columns. Where the parser follows a published
rule, ``correct`` is its published verdict and ``correct_strict`` (bool) evalcore's strict reading: the summary
then has ``accuracy_mean_strict`` beside ``accuracy_mean`` and ``verdicts_differ``, the questions whose two
verdicts differ in at least one order.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from evalcore.core.schema import STRICT, VERDICTS_DIFFER, strict_name
from evalcore.core.seeding import derive_seed
from evalcore.stats.aggregate import mean_of, safe_ratio
from evalcore.stats.bootstrap import estimate

__all__ = ["DEFINITIONS", "METRICS", "STRICT_METRICS", "agreement", "chosen_option", "accuracy_per_order",
           "question_stats", "summarize_orders"]

METRICS = ("accuracy_mean", "accuracy_sd", "consistency", "ifr")
#: the rows a published rule's parser adds (after accuracy_mean)
STRICT_METRICS = (strict_name("accuracy_mean"), VERDICTS_DIFFER)

DEFINITIONS = {
    "accuracy_mean": "accuracy averaged over option orders: mean over questions of each question's share of "
                     "orders answered correctly (= mean of the per-order accuracies when every question has "
                     "every order); unanswered = wrong",
    "accuracy_sd": "sample SD (ddof=1) over option orders of the per-order accuracies; NaN with one order; no CI",
    "consistency": "share of questions answered in every one of their orders with the same option text "
                   "(not the same letter) each time; a question with a single order counts when answered",
    "ifr": "instruction-following rate: share of responses parsed to an answer (parsed_index >= 0)",
    strict_name("accuracy_mean"): "accuracy_mean by evalcore's strict reading of the parser's published rule (the "
                                  "one option named, never guessed); accuracy_mean is the published verdict's",
    VERDICTS_DIFFER: "questions whose published verdict and strict verdict differ in at least one option order "
                     "(a count, no CI)",
}


def agreement(a: Sequence[int], b: Sequence[int]) -> float:
    """Share of positions where two parsers agree (both unanswered counts as agreement); NaN if empty."""
    if len(a) != len(b):
        raise ValueError(f"parser outputs differ in length: {len(a)} vs {len(b)}")
    if not a:
        return float("nan")
    return float(np.mean([x == y for x, y in zip(a, b)]))


def chosen_option(options: Sequence[str], parsed_index: int) -> str | None:
    """The option text chosen, or None when unanswered or the index is past the options."""
    return options[parsed_index] if 0 <= parsed_index < len(options) else None


def accuracy_per_order(df: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Accuracy and response count for each ``order_id`` within each group of ``by``."""
    keys = [*by, "order_id"]
    g = df.assign(correct=df["correct"].astype(float)).groupby(keys, sort=True, dropna=False)["correct"]
    return g.agg(accuracy="mean", n="size").reset_index()


_STRICT = "correct" + STRICT


def question_stats(df: pd.DataFrame) -> pd.DataFrame:
    """Per question (index, sorted): ``correct`` (mean over its orders), ``consistent`` (0/1),
    ``answered`` and ``responses`` (counts, for the IFR ratio); with ``correct_strict``, its mean too and
    ``differs`` (0/1: the two verdicts differ in some order)."""
    chosen = [chosen_option(list(o), int(p)) for o, p in zip(df["options"], df["parsed_index"])]
    work = pd.DataFrame({"question_id": df["question_id"].to_numpy(),
                         "correct": df["correct"].astype(float).to_numpy(),
                         "answered": (df["parsed_index"].astype(int) >= 0).astype(float).to_numpy(),
                         "chosen": chosen})
    if _STRICT in df.columns:
        work[_STRICT] = df[_STRICT].astype(float).to_numpy()
        work["differs"] = (work[_STRICT] != work["correct"]).astype(float)
    g = work.groupby("question_id", sort=True)
    out = g.agg(correct=("correct", "mean"), answered=("answered", "sum"), responses=("correct", "size"))
    out["consistent"] = g["chosen"].agg(lambda s: float(s.notna().all() and s.nunique() == 1))
    if _STRICT in work.columns:
        out[_STRICT] = g[_STRICT].mean()
        out["differs"] = g["differs"].max()
    return out


def _ifr(m: np.ndarray) -> np.ndarray:
    return safe_ratio(m[..., 0], m[..., 1], float("nan"))


def _group_rows(g: pd.DataFrame, key: tuple, *, resamples: int, confidence: float, seed: int) -> list[dict]:
    q = question_stats(g)
    per_order = accuracy_per_order(g)["accuracy"].to_numpy()
    sd = float(np.std(per_order, ddof=1)) if len(per_order) > 1 else float("nan")
    specs: dict[str, tuple[list[str], Any]] = {
        "accuracy_mean": (["correct"], mean_of()),
        "consistency": (["consistent"], mean_of()),
        "ifr": (["answered", "responses"], _ifr),
    }
    metrics: list[str] = list(METRICS)
    if _STRICT in q.columns:  # a published rule's parser: its strict twin beside accuracy_mean, and the count
        specs[strict_name("accuracy_mean")] = ([_STRICT], mean_of())
        metrics[1:1] = list(STRICT_METRICS)
    rows: list[dict] = []
    for metric in metrics:
        if metric == "accuracy_sd":
            vals = {"value": sd, "ci_low": float("nan"), "ci_high": float("nan"), "n": len(q)}
        elif metric == VERDICTS_DIFFER:
            vals = {"value": float(q["differs"].sum()), "ci_low": float("nan"), "ci_high": float("nan"), "n": len(q)}
        else:
            cols, fn = specs[metric]
            e = estimate(q[cols].to_numpy(), fn, resamples=resamples, confidence=confidence,
                         seed=derive_seed("bootstrap", seed, *key, metric))
            vals = {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n}
        rows.append({"metric": metric, **vals, "definition": DEFINITIONS[metric]})
    return rows


def summarize_orders(df: pd.DataFrame, by: Sequence[str] = (), *, resamples: int = 1000,
                     confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Long form: group columns, ``metric`` (:data:`METRICS`), ``value``, ``ci_low``, ``ci_high``,
    ``n`` (questions) and ``definition``; percentile bootstrap CIs resample questions."""
    tail = ["metric", "value", "ci_low", "ci_high", "n", "definition"]
    rows: list[dict] = []
    if df.empty:
        return pd.DataFrame(columns=[*by, *tail])
    groups = df.groupby(list(by), sort=True, dropna=False) if by else [((), df)]
    for key, g in groups:
        key = key if isinstance(key, tuple) else (key,)
        for r in _group_rows(g, key, resamples=resamples, confidence=confidence, seed=seed):
            rows.append({**dict(zip(by, key)), **r})
    return pd.DataFrame(rows, columns=[*by, *tail])
