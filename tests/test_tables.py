"""Reduction of judged chunk rows to per-item and summary tables."""

import pandas as pd
import pytest

from evalcore.scoring.requests import counts, merge_chunks, per_item_table
from evalcore.scoring.summary import summary_table


def _chunk(rid, i, n, extracted, error=None, **kw):
    return {"request_id": rid, "chunk_index": i, "n_chunks": n, "extracted": extracted, "text": f"t{i}",
            "error": error, "error_stage": "model" if error else None, **kw}


def test_merge_unites_labels_in_order_and_keeps_errors():
    rows = [_chunk("a", 1, 2, ["bass", "guitar"]), _chunk("a", 0, 2, ["guitar"]),
            _chunk("b", 0, 2, ["drums"]), _chunk("b", 1, 2, None, error="boom")]
    merged = {r["request_id"]: r for r in merge_chunks(rows)}
    assert merged["a"]["extracted"] == ["guitar", "bass"] and merged["a"]["text"] == "t0\nt1"
    assert merged["b"]["error"] == "boom" and merged["b"]["error_stage"] == "model"
    c = counts(10, 1, list(merged.values()))
    assert (c["requests_in"], c["requests_scored"], c["requests_errored"]) == (2, 1, 1)
    assert c["items_valid"] == 9 and c["errors_by_stage"] == {"model": 1}


def _factual(item, cond, extracted, labels):
    return {"request_id": f"{item}-{cond}", "dataset": "d", "item_id": item, "protocol": "factual", "task": "t",
            "model": "m", "condition": cond, "variant": "v", "option_order": 0, "extracted": extracted,
            "labels": labels, "error": None}


def test_summary_values_and_paired_difference_by_hand():
    rows = [
        _factual("i1", "correct", ["a", "b"], ["a", "b"]),  # tp 2
        _factual("i2", "correct", ["a"], ["a", "c"]),  # tp 1 fn 1
        _factual("i1", "random", ["c"], ["a", "b"]),  # fp 1 fn 2
        _factual("i2", "random", ["a"], ["a", "c"]),  # tp 1 fn 1
    ]
    per_item = per_item_table(rows)
    s = summary_table(per_item, resamples=200, confidence=0.95, seed=0).to_pandas()
    get = lambda cond, metric: s[(s.condition == cond) & (s.metric == metric)].iloc[0]  # noqa: E731
    # micro F1 correct: 2·3 / (2·3 + 0 + 1) = 6/7 ; random: 2·1 / (2·1 + 1 + 3) = 2/6
    assert get("correct", "f1_micro").value == pytest.approx(6 / 7)
    assert get("random", "f1_micro").value == pytest.approx(1 / 3)
    d = get("correct-random", "f1_micro")
    assert d.kind == "paired_diff" and d.value == pytest.approx(6 / 7 - 1 / 3) and d.n == 2
    # macro F1: correct (1 + 2/3)/2, random (0 + 2/3)/2
    assert get("correct", "f1_macro").value == pytest.approx((1 + 2 / 3) / 2)
    assert get("correct-random", "f1_macro").value == pytest.approx(0.5)
    scored = s[s.metric != "errored"]
    assert set(s["group"]) == {"all"} and (scored["n"] == 2).all()
    assert list(s[s.metric == "errored"]["value"]) == [0.0, 0.0]  # explicit denominators: no request errored
    assert s["definition"].str.len().min() > 10


def test_empty_per_item_gives_empty_summary():
    assert summary_table(pd.DataFrame(), resamples=200, confidence=0.95, seed=0).num_rows == 0


def _mcq(item, order, options, parsed, correct_index, cond="correct"):
    return {"request_id": f"{item}-{order}-{cond}", "dataset": "d", "item_id": item, "protocol": "mcq", "task": "t",
            "model": "m", "condition": cond, "variant": "v", "option_order": order, "options": options,
            "parsed_index": parsed, "correct_index": correct_index, "error": None}


def test_mcq_consistency_and_order_sd_by_hand():
    rows = [
        # i1: the same option ("x") chosen in both orders, right both times
        _mcq("i1", 0, ["x", "y"], 0, 0), _mcq("i1", 1, ["y", "x"], 1, 1),
        # i2: the same letter but different options across orders → inconsistent; right in order 0 only
        _mcq("i2", 0, ["p", "q"], 0, 0), _mcq("i2", 1, ["q", "p"], 0, 1),
    ]
    s = summary_table(per_item_table(rows), resamples=200, confidence=0.95, seed=0).to_pandas()
    get = lambda metric: s[(s.condition == "correct") & (s.metric == metric)].iloc[0]  # noqa: E731
    assert get("accuracy").value == pytest.approx(0.75)  # (1 + 0.5) / 2
    assert get("consistency").value == pytest.approx(0.5)  # i1 only
    # per-order accuracies: order 0 → 1.0, order 1 → 0.5; sample SD = 0.3536
    assert get("accuracy_sd").value == pytest.approx(0.5 ** 0.5 / 2)
    assert get("ifr").value == 1.0
