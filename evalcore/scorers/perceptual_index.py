"""RUListening's Perceptual Index (PI) and leave-one-out vote, and the RUL-MuchoMusic summary rows.

**The Perceptual Index** of a question (released code: github.com/yongyizang/AreYouReallyListening at d3971de,
``ExampleFilteringBasedOnPI/filter_based_on_PI.py``, ``assess_question_hardness``; the value stored as ``PI`` in
``RUL-MuchoMusic.json``): a text-only language model, shown the question without audio, is asked each
leave-one-distractor-out fold in a random option order; the fold's probability of the correct option is the
model's probability of the correct option's letter divided by the sum of its probabilities of every option's
letter. PI = 1 − the mean of that normalised probability over the presentations (four folds, each drawn four
times in the released code). 1 = a text-only model never favours the correct option (the question needs
listening); 0 = text alone answers it. :func:`perceptual_index` computes it from the probabilities.

**The leave-one-out vote** (released ``ExampleAudioEval/*.py``, ``evaluate_leave_one_out``): a question is
answered right when the option text chosen most often over its folds is the correct one; a fold whose
extraction found nothing, or a letter with no option, does not vote; a tie goes to the answer given first; no
vote at all is wrong. :func:`vote`.

**The run's rows** (:func:`rul_rows`, for items of the ``rul_muchomusic`` loader, per model × condition ×
prompt variant; bootstrap over questions, a question's folds resampled together):

* ``parse_failure_rate`` — share of scored requests from which the judge extracted no option;
* ``rul_vote_accuracy`` — share of questions whose leave-one-out vote is the correct answer;
* ``perceptual_index`` — text-only condition only: RUListening's formula applied to this model's text-only
  answers. A generated answer carries no option probabilities, so each fold's chosen option gets probability 1
  (a parse failure: 0 for the correct option); the value is then 1 − the mean over questions of the share of
  folds answered right without audio. Chance with four options gives 0.75;
* ``released_perceptual_index`` — text-only condition only: the mean released ``PI`` of the same questions
  (RUListening's text-only model, Qwen2.5-7B), beside the run's for comparison.

Pass-level accuracy (every fold one question) is the MCQ scorer's ``accuracy`` of these items.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

import numpy as np
import pandas as pd

from evalcore.core.seeding import derive_seed
from evalcore.stats.aggregate import mean_of
from evalcore.stats.bootstrap import estimate

__all__ = ["perceptual_index", "vote", "rul_rows", "DEFINITIONS", "TASK"]

TASK = "rul_muchomusic"
KEYS = ["protocol", "dataset", "model", "variant", "condition"]
_UNIT = "resampling questions (a question's folds together)"
DEFINITIONS = {
    "parse_failure_rate": "share of scored requests from which the judge extracted no option (RUListening's "
                          f"extraction found nothing; no random fallback); bootstrap {_UNIT}",
    "rul_vote_accuracy": "share of questions whose leave-one-out vote (most frequent option text over the folds; "
                         "unparsed folds do not vote; ties to the first given) is the correct answer, as "
                         f"RUListening's released evaluation scores it; bootstrap {_UNIT}",
    "perceptual_index": "RUListening's Perceptual Index, 1 − mean over questions and folds of the normalised "
                        "probability of the correct option without audio, from this model's text-only answers "
                        "(the chosen option has probability 1, a parse failure 0); 0.75 is chance with four "
                        f"options; bootstrap {_UNIT}",
    "released_perceptual_index": "mean of the released per-question PI (RUListening's text-only model, "
                                 f"Qwen2.5-7B, 4 × 4 presentations) over the same questions; bootstrap {_UNIT}",
}


def perceptual_index(presentations: Sequence[tuple[Sequence[float], int]]) -> float:
    """RUListening's PI of one question from its text-only presentations: each is (the model's probability of
    each option's letter, in presented order; the correct option's position). 1 − mean of
    p[correct] / sum(p). ValueError on no presentation, a negative probability or a zero sum."""
    if not presentations:
        raise ValueError("a Perceptual Index needs at least one presentation")
    shares = []
    for probs, correct in presentations:
        p = np.asarray(probs, dtype=float)
        if p.ndim != 1 or not 0 <= correct < len(p) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(f"bad presentation: probabilities {list(probs)}, correct position {correct}")
        shares.append(p[correct] / p.sum())
    return float(1.0 - np.mean(shares))


def vote(answers: Sequence[str | None]) -> str | None:
    """The leave-one-out vote over a question's folds (answer texts; None = no answer): the most frequent
    answer, ties to the one given first; None when no fold answered."""
    given = [a for a in answers if a]
    return Counter(given).most_common(1)[0][0] if given else None


def _meta(v: Any) -> dict:
    try:
        m = json.loads(v) if isinstance(v, str) else v
    except ValueError:
        return {}
    return m if isinstance(m, dict) else {}


def _answer(options: Any, parsed: Any) -> str | None:
    p = -1 if parsed is None or parsed != parsed else int(parsed)
    opts = list(options) if options is not None else []
    return opts[p] if 0 <= p < len(opts) else None


def _question_stats(g: pd.DataFrame) -> pd.DataFrame:
    """Per question (index ``_rul_id``, sorted): parse-failure share, whether the vote (:func:`vote`'s rule, on
    grouped columns) is right, share of folds right, released PI. ``g``: one cell's rows with ``_answer``, ``_truth``
    and ``_pos`` (the order answers were given)."""
    stats = g.groupby("_rul_id", sort=True).agg(
        parse_failure_rate=("_failed", "mean"), fold_accuracy=("_right", "mean"), released_pi=("_released_pi", "first"),
        truth=("_truth", "first"))
    given = g[g["_answer"].notna()]
    tally = given.groupby(["_rul_id", "_answer"], sort=False).agg(n=("_pos", "size"), first=("_pos", "min"))
    top = tally.reset_index().sort_values(["_rul_id", "n", "first"], ascending=[True, False, True])
    voted = top.drop_duplicates("_rul_id").set_index("_rul_id")["_answer"].reindex(stats.index)
    stats["rul_vote_accuracy"] = (voted.notna() & (voted == stats["truth"])).astype(float)
    return stats


def _row(key: tuple, metric: str, values: np.ndarray, resamples: int, confidence: float, seed: int) -> dict:
    e = estimate(values[:, None], mean_of(), resamples=resamples, confidence=confidence,
                 seed=derive_seed("bootstrap-rul", seed, *key, metric))
    return {**dict(zip(KEYS, key)), "group": "all", "kind": "value", "metric": metric, "value": e.value,
            "ci_low": e.ci_low, "ci_high": e.ci_high, "n": e.n, "definition": DEFINITIONS[metric]}


def rul_rows(df: pd.DataFrame, *, resamples: int, confidence: float, seed: int) -> list[dict[str, Any]]:
    """The RUL-MuchoMusic summary rows (module docstring) of the per-item rows ``df`` (none without such items)."""
    if df.empty or "task" not in df.columns or not (df["task"] == TASK).any():
        return []
    work = df[df["task"] == TASK]
    meta = [_meta(m) for m in work["metadata"]]
    answers = [_answer(o, p) for o, p in zip(work["options"], work["parsed_index"])]
    truth = [_answer(o, c) for o, c in zip(work["options"], work["correct_index"])]
    work = work.assign(_rul_id=[str(m.get("rul_id", i)) for m, i in zip(meta, work["item_id"])],
                       _fold=[m.get("fold") if isinstance(m.get("fold"), int) else -1 for m in meta],
                       _released_pi=[m.get("released_pi") for m in meta], _answer=answers, _truth=truth,
                       _failed=(work["parsed_index"].fillna(-1).astype(int) < 0).astype(float),
                       _right=[float(a is not None and a == t) for a, t in zip(answers, truth)])
    # the vote's "first given" is the fold order (then the option order), as the released loop asks the folds
    work = work.sort_values(["_fold", "option_order"] if "option_order" in work.columns else ["_fold"], kind="stable")
    work = work.assign(_pos=np.arange(len(work)))
    rows: list[dict[str, Any]] = []
    for key, g in work.groupby(KEYS, sort=True, dropna=False):
        stats = _question_stats(g)
        for metric in ("parse_failure_rate", "rul_vote_accuracy"):
            rows.append(_row(key, metric, stats[metric].to_numpy(float), resamples, confidence, seed))
        if key[KEYS.index("condition")] == "text_only":
            rows.append(_row(key, "perceptual_index", 1.0 - stats["fold_accuracy"].to_numpy(float), resamples,
                             confidence, seed))
            released = pd.to_numeric(stats["released_pi"], errors="coerce").dropna().to_numpy(float)
            if released.size:
                rows.append(_row(key, "released_perceptual_index", released, resamples, confidence, seed))
    return rows
