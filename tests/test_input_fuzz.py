"""Property-based tests: arbitrary JSON values in every item field and every ``evalcore score`` input column.

No exception escapes validation, and every row is either valid or an error row whose reason names a field
(or column). Examples are bounded and derandomized (a fixed seed), so CI runs the same cases every time.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalcore.datasets.items_file import ItemsFile
from evalcore.datasets.validate import FIELDS, validate_items
from evalcore.core.schema import ITEM, conform
from evalcore.cli.score import factual as score_factual
from evalcore.cli.score import factual_formats
from evalcore.cli.score import mcq as score_mcq
from evalcore.cli.score.io import read_rows
from evalcore.textmetrics.text_profiles import check_pair

FUZZ = settings(max_examples=100, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# JSON values, odd ones included: huge and negative integers, NaN and ±inf, surrogates, deep-ish nesting
EDGE_NUMBERS = st.sampled_from([10**400, -10**400, 10**20, 2**63, 2**53 + 1, 1e308, -1e308, 5e-324, -0.0, 0,
                                float("nan"), float("inf"), -float("inf")])
SCALARS = (st.none() | st.booleans() | EDGE_NUMBERS | st.integers(min_value=-10**400, max_value=10**400)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20)
           | st.sampled_from(["", " ", "NaN", "[1,2]", "{}", '{"genre": {"a": 1}}', "\ud800", "guitar", "mcq",
                              "factual", "freeform", "../a.wav", "[" * 200 + "]" * 200]))
JSON = EDGE_NUMBERS | st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                                   | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)

BASE = {"item_id": "a", "protocol": "factual", "question": "Which instruments?", "labels": ["guitar"],
        "audio_uri": "/audio/a.wav"}
ITEM_KEYS = st.sampled_from([*FIELDS, "dataset", "extra"])


def _names_a_field(reason: str, fields) -> bool:
    return reason.startswith("unknown field") or any(f in reason for f in fields)


@pytest.mark.parametrize("field", [*FIELDS, "dataset", "extra"])
def test_each_item_field_never_raises_and_errors_name_a_field(field):
    @FUZZ
    @given(JSON)
    def one(value):
        _check_item({**BASE, field: value})

    one()


@FUZZ
@given(st.dictionaries(ITEM_KEYS, JSON, min_size=2, max_size=5))
def test_item_rows_never_raise_and_errors_name_a_field(changes):
    _check_item({**BASE, **changes})


def _check_item(row: dict) -> None:
    good, bad = validate_items("d", [row])
    assert len(good) + len(bad) == 1
    if bad:
        assert bad[0]["error_stage"] == "load" and bad[0]["error_class"] == "input"
        assert _names_a_field(bad[0]["error"], FIELDS), bad[0]["error"]
    else:
        item = good[0]
        conform([item], ITEM)  # a valid item is writable as the items table
        for f in ("excerpt_start", "excerpt_end"):
            assert item[f] is None or (isinstance(item[f], float) and math.isfinite(item[f]))
        assert item["metadata"] is None or isinstance(json.loads(item["metadata"]), dict)


@FUZZ
@given(st.dictionaries(ITEM_KEYS, JSON, min_size=1, max_size=5) | JSON)
def test_item_lines_of_a_jsonl_file_never_raise(value):
    """The same values as a JSONL line (NaN and Infinity as Python's json writes them) through the file reader."""
    row = {**BASE, **value} if isinstance(value, dict) else value
    line = json.dumps(row).encode("utf-8", "surrogatepass")
    rows = list(ItemsFile._jsonl(line + b"\n"))
    good, bad = validate_items("d", rows)
    assert len(good) + len(bad) == len(rows) == 1


MCQ = {"question_id": "q", "order_id": 0, "options": ["a", "b"], "correct_index": 0, "response": "(A)"}
FACTUAL = {"response": "a guitar", "labels": ["guitar"]}
TRUE_FALSE = {"response": "yes", "label": "guitar", "truth": True, "item_id": "i", "chunk_index": 0}
BINARY = {"response": "(A)", "options": ["guitar", "piano"], "correct_index": 0, "item_id": "i", "chunk_index": 0}
FREEFORM = {"candidate": "a calm piano piece", "reference": "a slow piano piece"}


def _read_back(tmp_path, row: dict) -> dict:
    """``row`` written as a JSONL line and read back by the score commands' reader."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(json.dumps(row).encode("utf-8", "surrogatepass") + b"\n")
    df = read_rows(str(path), [])
    assert len(df) == 1
    return df.to_dict("records")[0]


@pytest.mark.parametrize("base, check", [
    (MCQ, score_mcq.row_error),
    (FACTUAL, score_factual.row_error),
    (TRUE_FALSE, lambda r: factual_formats._true_false_error(r, "instrument")),
    (BINARY, lambda r: factual_formats._binary_choice_error(r, "instrument")),
    (FREEFORM, lambda r: r["_input_error"] if isinstance(r["_input_error"], str) else check_pair(r["reference"],
                                                                                                 r["candidate"])),
], ids=["mcq", "factual", "true_false", "binary_choice", "freeform"])
def test_score_input_columns_never_raise_and_errors_name_a_column(tmp_path_factory, base, check):
    tmp = tmp_path_factory.mktemp("fuzz")

    @FUZZ
    @given(st.dictionaries(st.sampled_from(list(base)), JSON, min_size=1, max_size=3))
    def one(changes):
        row = _read_back(tmp, {**base, **changes})
        err = check(row)
        assert not err or _names_a_column(err, base), err

    one()


def _names_a_column(reason: str, base: dict) -> bool:
    return reason.startswith("line ") or any(c in reason for c in base) or "input" in reason


@FUZZ
@given(st.dictionaries(st.sampled_from(list(MCQ)), JSON, min_size=1, max_size=3))
def test_score_mcq_rows_are_scored_or_errored(changes):
    df = pd.DataFrame([{**MCQ, "_input_error": None}, {**MCQ, **changes, "_input_error": None}])
    out = score_mcq.score_rows(df, "strict")
    assert len(out) == 2 and out["error"].isna().iloc[0]
    assert out["error"].isna().iloc[1] or isinstance(out["error"].iloc[1], str)


@FUZZ
@given(st.dictionaries(st.sampled_from(list(FACTUAL)), JSON, min_size=1, max_size=2))
def test_score_factual_rows_are_scored_or_errored(changes):
    from evalcore.vocab import LEXICONS

    df = pd.DataFrame([{**FACTUAL, **changes, "_input_error": None}])
    out = score_factual.score_rows(df, "instrument", LEXICONS["musicnet_instrument"], {})
    assert len(out) == 1
    assert out["error"].iloc[0] is None or isinstance(out["error"].iloc[0], str)
