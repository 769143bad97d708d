"""Statistics that respect clips: the clip (cluster) bootstrap, McNemar's exact test, and the tables that name
both (run summary, ``evalcore compare``, the nightly's comparisons)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from evalcore.nightly import compare
from evalcore.scoring.requests import per_item_table
from evalcore.scoring.summary import summary_table
from evalcore.stats.bootstrap import estimate, paired_difference
from evalcore.stats.mcnemar import exact_p, mcnemar

MEAN = lambda m: m[..., 0]  # noqa: E731
BOOT = {"resamples": 2000, "confidence": 0.95, "seed": 7}


def _clip_outcomes(clips: int, per_clip: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """0/1 outcomes of ``per_clip`` questions on each of ``clips`` clips: a clip is mostly easy or mostly hard."""
    gen = np.random.default_rng(seed)
    easy = gen.random(clips) < 0.5
    p = np.where(np.repeat(easy, per_clip), 0.9, 0.2)
    return (gen.random(clips * per_clip) < p).astype(float)[:, None], np.repeat(np.arange(clips), per_clip)


def _width(e) -> float:
    return e.ci_high - e.ci_low


def test_clip_bootstrap_is_wider_with_shared_clips_and_equal_with_one_question_each() -> None:
    x, clip = _clip_outcomes(60, 5, seed=0)
    by_item = estimate(x, MEAN, **BOOT)
    by_clip = estimate(x, MEAN, **BOOT, clusters=[f"clip{c}" for c in clip])
    assert by_clip.value == by_item.value
    assert (by_item.unit, by_item.clusters, by_clip.unit, by_clip.clusters) == ("item", 300, "clip", 60)
    # questions of one clip agree far more than questions of different clips: the honest interval is wider
    assert _width(by_clip) > 1.5 * _width(by_item)

    single, _ = _clip_outcomes(300, 1, seed=1)
    one_each = estimate(single, MEAN, **BOOT, clusters=[f"clip{i}" for i in range(300)])
    assert one_each == estimate(single, MEAN, **BOOT)  # the same draws, the same interval, unit "item"


def test_paired_clip_bootstrap_draws_the_same_clips_for_both_sides() -> None:
    a, clip = _clip_outcomes(50, 4, seed=2)
    b = np.where(np.random.default_rng(3).random(a.shape) < 0.3, 1.0 - a, a)
    item = paired_difference(a, b, MEAN, **BOOT)
    clipped = paired_difference(a, b, MEAN, **BOOT, clusters=clip)
    assert clipped.value == item.value and (clipped.unit, clipped.clusters) == ("clip", 50)
    assert paired_difference(a, a, MEAN, **BOOT, clusters=clip).ci_low == 0  # pairing kept within clips
    single = paired_difference(a, b, MEAN, **BOOT, clusters=np.arange(len(a)))
    assert (single.ci_low, single.ci_high, single.unit) == (item.ci_low, item.ci_high, "item")


def test_missing_clip_labels_make_items_their_own_clusters() -> None:
    x = np.array([[1.0], [0.0], [1.0], [1.0]])
    e = estimate(x, MEAN, **BOOT, clusters=["a", None, "a", float("nan")])
    assert (e.unit, e.clusters) == ("clip", 3)


def test_mcnemar_by_hand_and_against_scipy() -> None:
    # b = 1, c = 8: p = 2 · P(X ≤ 1 | n = 9, ½) = 2 · (1 + 9) / 512
    assert exact_p(1, 8) == pytest.approx(0.0390625, abs=1e-15)
    assert exact_p(8, 1) == exact_p(1, 8) and exact_p(0, 0) == 1.0 and exact_p(4, 4) == 1.0
    first = np.array([1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1])
    second = np.array([1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    t = mcnemar(first, second)
    assert (t.b, t.c) == (1, 8) and t.p_value == pytest.approx(0.0390625)
    with pytest.raises(ValueError, match="0/1"):
        mcnemar(np.array([0.5]), np.array([1.0]))

    from scipy.stats import binomtest

    for b in range(0, 25):
        for c in range(0, 25):
            if b + c:
                want = binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
                assert exact_p(b, c) == pytest.approx(want, rel=1e-12, abs=1e-15), (b, c)
                assert exact_p(b, c) == pytest.approx(
                    min(1.0, 2 * sum(math.comb(b + c, k) for k in range(min(b, c) + 1)) / 2 ** (b + c)),
                    rel=1e-12)


def _mcq_rows(correct: dict[str, list[int]], per_clip: int) -> list[dict]:
    rows = []
    for cond, outcomes in correct.items():
        for i, ok in enumerate(outcomes):
            rows.append({"request_id": f"q{i}-{cond}", "dataset": "d", "item_id": f"q{i:03d}", "protocol": "mcq",
                         "task": "t", "model": "m", "condition": cond, "variant": "v", "option_order": 0,
                         "options": ["a", "b"], "parsed_index": 0 if ok else 1, "correct_index": 0,
                         "clip_id": f"q{(i // per_clip) * per_clip:03d}", "error": None})
    return rows


def test_run_summary_names_the_unit_and_the_mcnemar_test() -> None:
    gen = np.random.default_rng(4)
    right = [int(v) for v in gen.random(90) < 0.8]
    guess = [int(v) for v in gen.random(90) < 0.5]
    s = summary_table(per_item_table(_mcq_rows({"correct": right, "random": guess}, per_clip=3)),
                      resamples=300, confidence=0.95, seed=0).to_pandas()
    acc = s[(s["metric"] == "accuracy") & (s["group"] == "all")].set_index("condition")
    assert list(acc.loc[["correct", "random"], "ci_unit"]) == ["clip", "clip"]
    assert list(acc.loc[["correct", "random"], "clusters"]) == [30, 30]
    d = acc.loc["correct-random"]
    b = sum(r and not g for r, g in zip(right, guess))
    c = sum(g and not r for r, g in zip(right, guess))
    assert d["test"] == "mcnemar_exact" and d["p_value"] == pytest.approx(exact_p(b, c))
    assert d["correction"] == "holm" and d["p_adjusted"] >= d["p_value"]
    other = s[(s["kind"] == "paired_diff") & (s["metric"] != "accuracy")]
    assert len(other) and set(other["test"]) == {"paired_bootstrap"} and other["p_value"].isna().all()
    assert s[s["kind"] == "value"]["test"].isna().all()
    # one question per clip: the same intervals as the item bootstrap, named "item"
    one = summary_table(per_item_table(_mcq_rows({"correct": right, "random": guess}, per_clip=1)),
                        resamples=300, confidence=0.95, seed=0).to_pandas()
    no_clip = summary_table(per_item_table([{k: v for k, v in r.items() if k != "clip_id"}
                                            for r in _mcq_rows({"correct": right, "random": guess}, 1)]),
                            resamples=300, confidence=0.95, seed=0).to_pandas()
    cols = ["value", "ci_low", "ci_high", "n", "ci_unit", "clusters"]
    pd.testing.assert_frame_equal(one[cols], no_clip[cols])
    assert set(one.dropna(subset=["ci_unit"])["ci_unit"]) == {"item"}


def _scores(per_clip: int, cur: list[int], ref: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    def frame(outcomes: list[int]) -> pd.DataFrame:
        return pd.DataFrame([{"protocol": "mcq", "dataset": "d", "condition": "correct", "variant": "v", "group": "all",
                              "metric": metric, "item_id": f"q{i}", "clip_id": f"c{i // per_clip}",
                              "score": float(v) if metric == "accuracy" else 0.5 * v}
                             for metric in ("accuracy", "f1") for i, v in enumerate(outcomes)])
    return frame(cur), frame(ref)


def test_nightly_and_compare_rows_name_their_test_and_unit() -> None:
    gen = np.random.default_rng(5)
    ref = [int(v) for v in gen.random(80) < 0.7]
    cur = [int(v) if gen.random() < 0.8 else 0 for v in ref]
    rows = compare.decide(compare.compare_scores(*_scores(4, cur, ref), 300, 0.95, 0), lambda m: 0.05, 0.05)
    by = rows.set_index("metric")
    assert by.loc["accuracy", "test"] == "mcnemar_exact" and by.loc["f1", "test"] == "paired_t"
    b = sum(x and not y for x, y in zip(cur, ref))
    c = sum(y and not x for x, y in zip(cur, ref))
    assert by.loc["accuracy", "p_value"] == pytest.approx(exact_p(b, c))
    assert list(by["ci_unit"]) == ["clip", "clip"] and list(by["clusters"]) == [20, 20]
    assert list(rows.columns) == [c for c in compare.REGRESSION_COLUMNS if c in rows.columns]

    from evalcore.reports.tables_html import comparison_rows

    shown = {r["metric"]: r for r in comparison_rows(rows)}
    assert shown["accuracy"]["test"] == "McNemar exact" and shown["f1"]["test"] == "paired t"
    assert shown["accuracy"]["CI over"] == "20 clips"


def test_a_report_section_says_when_its_cis_resample_clips() -> None:
    from evalcore.reports.markdown import _ci_unit_sentence

    clip = pd.DataFrame({"ci_unit": ["clip", "clip", None], "clusters": [48, 52, None]})
    assert _ci_unit_sentence(clip) == (" Its CIs resample clips (48–52 per cell), every question of one together, "
                                       "since questions share them.")
    assert _ci_unit_sentence(pd.DataFrame({"ci_unit": ["item"], "clusters": [10]})) == ""
    assert _ci_unit_sentence(pd.DataFrame({"value": [1.0]})) == ""  # a summary written before clip units
