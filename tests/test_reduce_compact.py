"""The reduction's compact per-item frame: key columns as categoricals, joined part by part without changing a
value, a group's order or the summary computed from it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalcore.pipeline.reduce import _compact, _concat
from evalcore.stats.aggregate import Aggregate, mean_of
from evalcore.stats.aggregate import aggregate


def _part(models: list[str], conditions: list[str], start: int) -> pd.DataFrame:
    n = len(models)
    return pd.DataFrame({"item_id": [f"q{start + i}" for i in range(n)], "model": pd.Series(models, dtype="str"),
                         "condition": pd.Series(conditions, dtype="str"), "task": [None] * n,
                         "bleu": np.arange(start, start + n, dtype=float)})


def test_parts_with_other_categories_join_to_the_same_values_in_sorted_category_order():
    a = _part(["zeta", "alpha", "zeta"], ["random", "correct", "correct"], 0)
    b = _part(["mid", "mid"], ["correct", "random"], 3)
    want = pd.concat([a, b], ignore_index=True)
    got = _concat([_compact(a.copy()), _compact(b.copy())])
    assert isinstance(got["model"].dtype, pd.CategoricalDtype)
    assert list(got["model"].cat.categories) == ["alpha", "mid", "zeta"]
    assert got["model"].astype(str).tolist() == want["model"].tolist()
    assert got["condition"].astype(str).tolist() == want["condition"].tolist()
    assert got["item_id"].tolist() == want["item_id"].tolist() and got["bleu"].tolist() == want["bleu"].tolist()
    assert got["task"].isna().all()  # a column of nulls alone is left as it was


def test_a_column_one_part_lacks_is_null_there_and_the_rest_keep_their_values():
    a = _part(["m1"], ["correct"], 0)
    b = _part(["m2"], ["correct"], 1).drop(columns=["condition"])
    got = _concat([_compact(a.copy()), _compact(b.copy())])
    assert got["condition"].tolist()[0] == "correct" and pd.isna(got["condition"].tolist()[1])
    assert got["model"].astype(str).tolist() == ["m1", "m2"]


def test_aggregates_of_the_categorical_frame_equal_those_of_the_plain_one():
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"item_id": [f"q{i % 50}" for i in range(n)],
                       "model": rng.choice(["sim1", "sim0", "base"], n).astype(object),
                       "condition": rng.choice(["random", "correct"], n).astype(object),
                       "bleu": rng.random(n)})
    agg = [Aggregate("bleu", ("bleu",), mean_of(0), "mean BLEU")]
    kw = {"resamples": 50, "confidence": 0.95, "seed": 7}
    plain = aggregate(df, agg, ["model", "condition"], **kw)
    compact = aggregate(_concat([_compact(df.iloc[:150].copy()), _compact(df.iloc[150:].copy())]), agg,
                        ["model", "condition"], **kw)
    assert plain == compact and len(plain) == 6
    assert [(r["model"], r["condition"]) for r in plain] == sorted((r["model"], r["condition"]) for r in plain)


def test_cells_yield_what_pandas_groupby_yields_one_group_at_a_time():
    from evalcore.stats.aggregate import cells

    rng = np.random.default_rng(1)
    n = 300
    df = pd.DataFrame({"model": rng.choice(["b", "a", None], n).astype(object),
                       "variant": rng.choice(["v2", "v1"], n).astype(object), "x": rng.random(n)},
                      index=rng.permutation(n))
    for frame in (df, _compact(df.copy()).astype({"model": "category"})):
        for by in (["model", "variant"], ["variant"]):
            want = [(k, g) for k, g in frame.groupby(by, sort=True, dropna=False)]
            got = list(cells(frame, by))
            assert [k for k, _ in got] == [k for k, _ in want] and len(got) == len(want) > 1
            for (_, a), (_, b) in zip(got, want):
                pd.testing.assert_frame_equal(a, b)
