"""``evalcore score mcq`` and the option-order metrics, checked against hand-computed numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.scorers.mcq_orders import accuracy_per_order, question_stats, summarize_orders

runner = CliRunner()

OPTIONS = {"q1": ["Piano", "Violin", "Trumpet", "Guitar"],  # option 0 is the correct one
           "q2": ["Happy", "Sad", "Angry", "Calm"],
           "q3": ["Fast", "Slow", "Moderate", "Variable"]}
# presented position p shows option PERMS[order][p]; the correct option 0 is at A, B, D
PERMS = [[0, 1, 2, 3], [1, 0, 3, 2], [3, 2, 1, 0]]
# the option each model chose (None = unanswered), per question, per order
CHOICES = {
    "m1": {"q1": [0, 0, 0],        # letters A, B, D: right ×3, consistent
           "q2": [0, 1, 0],        # letters A, A, D: right, wrong, right — not consistent
           "q3": [0, 2, None]},    # letters A, D, -: right, wrong, unanswered — not consistent
    "m2": {"q1": [1, 1, 1],        # letters B, A, C: wrong ×3 but the same option text — consistent
           "q2": [0, 0, 0],        # letters A, B, D: right ×3, consistent
           "q3": [0, 1, 1]},       # letters A, A, C: same letter A twice, different texts — not consistent
}
# Hand computation (accuracy per order = share of the 3 questions right in that order):
# m1: order 0: q1 ✓ q2 ✓ q3 ✓ = 3/3; order 1: ✓ ✗ ✗ = 1/3; order 2: ✓ ✓ ✗(unanswered) = 2/3
#     mean = (1 + 1/3 + 2/3)/3 = 2/3; deviations 1/3, -1/3, 0 → var = (1/9 + 1/9)/2 = 1/9 → SD = 1/3
#     consistency = 1/3 (q1 only); IFR = 8/9 (one unanswered response of nine)
# m2: order 0: ✗ ✓ ✓ = 2/3; order 1: ✗ ✓ ✗ = 1/3; order 2: ✗ ✓ ✗ = 1/3
#     mean = 4/9; deviations 2/9, -1/9, -1/9 → var = (4 + 1 + 1)/81/2 = 1/27 → SD = sqrt(1/27) ≈ 0.19245
#     consistency = 2/3 (q1, q2); IFR = 1
EXPECTED = {"m1": {"accuracy_mean": 2 / 3, "accuracy_sd": 1 / 3, "consistency": 1 / 3, "ifr": 8 / 9},
            "m2": {"accuracy_mean": 4 / 9, "accuracy_sd": math.sqrt(1 / 27), "consistency": 2 / 3, "ifr": 1.0}}
PER_ORDER = {"m1": [1.0, 1 / 3, 2 / 3], "m2": [2 / 3, 1 / 3, 1 / 3]}


def example_rows() -> list[dict]:
    rows = []
    for model, by_q in CHOICES.items():
        for q, picks in by_q.items():
            for order, pick in enumerate(picks):
                perm = PERMS[order]
                response = "I cannot tell." if pick is None else f"({'ABCD'[perm.index(pick)]})"
                rows.append({"question_id": q, "order_id": order, "model": model, "condition": "correct",
                             "options": [OPTIONS[q][i] for i in perm], "correct_index": perm.index(0),
                             "response": response})
    return rows


def write_jsonl(path: Path, rows: list) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def run(*args: str):
    return runner.invoke(app, ["score", "mcq", *args])


def summary_values(out: Path) -> dict[tuple[str, str], pd.Series]:
    s = pd.read_parquet(out / "summary.parquet")
    return {(r.model, r.metric): r for r in s.itertuples(index=False)}


# ---------------------------------------------------------------- metrics module


def scored_frame() -> pd.DataFrame:
    df = pd.DataFrame(example_rows())
    letters = {"(A)": 0, "(B)": 1, "(C)": 2, "(D)": 3}
    df["parsed_index"] = [letters.get(r, -1) for r in df["response"]]
    df["correct"] = df["parsed_index"] == df["correct_index"]
    return df


def test_accuracy_per_order_by_hand() -> None:
    acc = accuracy_per_order(scored_frame(), ["model"])
    for model, expected in PER_ORDER.items():
        got = acc[acc["model"] == model].sort_values("order_id")["accuracy"].tolist()
        assert got == pytest.approx(expected)
    assert set(acc["n"]) == {3}


def test_question_stats_consistency_uses_option_text() -> None:
    q = question_stats(scored_frame().query("model == 'm2'"))
    assert q["consistent"].to_dict() == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    assert q["answered"].tolist() == [3, 3, 3] and q["responses"].tolist() == [3, 3, 3]


def test_summarize_orders_by_hand() -> None:
    s = summarize_orders(scored_frame(), ["model"], resamples=200, seed=1)
    assert list(s.columns) == ["model", "metric", "value", "ci_low", "ci_high", "n", "definition"]
    for r in s.itertuples(index=False):
        assert r.value == pytest.approx(EXPECTED[r.model][r.metric]), (r.model, r.metric)
        assert r.n == 3
        if r.metric == "accuracy_sd":
            assert math.isnan(r.ci_low) and math.isnan(r.ci_high)
        else:
            assert r.ci_low <= r.value <= r.ci_high


def test_single_order_sd_is_nan_and_incomplete_orders_average_questions() -> None:
    df = scored_frame().query("model == 'm1'")
    one = summarize_orders(df[df["order_id"] == 0], resamples=50).set_index("metric")
    assert math.isnan(one.loc["accuracy_sd", "value"])
    assert one.loc["accuracy_mean", "value"] == 1.0
    # drop q3's order 2: q1 = 1, q2 = 2/3, q3 = 1/2 (orders 0, 1) → mean over questions = 13/18
    part = df[~((df["question_id"] == "q3") & (df["order_id"] == 2))]
    got = summarize_orders(part, resamples=50).set_index("metric")
    assert got.loc["accuracy_mean", "value"] == pytest.approx(13 / 18)
    assert got.loc["ifr", "value"] == 1.0


def test_bootstrap_is_seeded() -> None:
    a = summarize_orders(scored_frame(), ["model"], resamples=100, seed=3)
    b = summarize_orders(scored_frame(), ["model"], resamples=100, seed=3)
    pd.testing.assert_frame_equal(a, b)


# ---------------------------------------------------------------- the command


def test_score_mcq_jsonl_by_hand(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", example_rows())
    out = tmp_path / "out"
    res = run(src, "--out", str(out), "--resamples", "200")
    assert res.exit_code == 0, res.output
    assert "rows: 18 in = 18 scored + 0 errored" in res.stderr
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert list(per_item.columns) == ["question_id", "order_id", "model", "condition", "options",
                                      "correct_index", "response", "parsed_index", "correct", "error"]
    assert per_item["error"].isna().all()
    assert per_item["parsed_index"].tolist().count(-1) == 1
    summary = pd.read_parquet(out / "summary.parquet")
    assert {"model", "condition", "metric", "value", "ci_low", "ci_high", "n", "definition"} <= set(summary.columns)
    assert set(summary["metric"]) == {"accuracy_mean", "accuracy_sd", "consistency", "ifr"}
    assert len(summary) == 8 and set(summary["n"]) == {3}
    got = summary_values(out)
    for model, metrics in EXPECTED.items():
        for metric, value in metrics.items():
            assert got[model, metric].value == pytest.approx(value), (model, metric)
    report = (out / "report.md").read_text()
    assert "| model=m1, condition=correct | 3 | 0.667 ± 0.333 | 0.333 | 0.889 |" in report
    assert "| model=m2, condition=correct | 3 | 0.444 ± 0.192 | 0.667 | 1.000 |" in report


def test_score_mcq_parquet_and_group_by(tmp_path: Path) -> None:
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(example_rows()), src)
    out = tmp_path / "out"
    res = run(str(src), "--out", str(out), "--group-by", "model", "--resamples", "50")
    assert res.exit_code == 0, res.output
    summary = pd.read_parquet(out / "summary.parquet")
    assert "condition" not in summary.columns
    assert summary.set_index(["model", "metric"]).loc[("m2", "consistency"), "value"] == pytest.approx(2 / 3)
    res = run(str(src), "--out", str(tmp_path / "all"), "--group-by", "", "--resamples", "50")
    assert res.exit_code == 0, res.output
    s = pd.read_parquet(tmp_path / "all" / "summary.parquet").set_index("metric")
    assert s.loc["ifr", "value"] == pytest.approx(17 / 18) and s.loc["ifr", "n"] == 3


def test_bad_rows_are_counted_not_fatal(tmp_path: Path) -> None:
    good = example_rows()[:3]
    base = dict(good[0], question_id="qx")
    bad = [
        "[1, 2, 3]",                                  # not an object
        "{not json",                                  # invalid JSON
        dict(base, response=None),
        dict(base, response=42),
        dict(base, options="Piano, Violin"),
        dict(base, options=["Piano"]),
        dict(base, correct_index=7),
        dict(base, correct_index="x"),
    ]
    src = write_jsonl(tmp_path / "in.jsonl", [*good, *bad])
    out = tmp_path / "out"
    res = run(src, "--out", str(out), "--resamples", "20")
    assert res.exit_code == 0, res.output
    assert "rows: 11 in = 3 scored + 8 errored" in res.stderr
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert len(per_item) == 11 and per_item["error"].notna().sum() == 8
    errors = per_item["error"].dropna().tolist()
    assert any("not a JSON object" in e for e in errors) and any("invalid JSON" in e for e in errors)
    assert "no response" in errors and any("not a string" in e for e in errors)
    assert sum("options is not" in e for e in errors) == 2 and sum("correct_index" in e for e in errors) == 2
    assert per_item.loc[per_item["error"].notna(), "parsed_index"].isna().all()
    assert per_item["order_id"].dtype == "Int64"  # not float because one line was no object
    kept = per_item[per_item["error"] == "response is not a string (int)"]
    # options mixes lists and a string, so the column is written as JSON text; no value is dropped
    assert json.loads(kept["options"].iloc[0]) == good[0]["options"]  # valid values of a bad row are kept
    odd = per_item[per_item["error"] == "options is not a list of at least two strings"]
    assert "Piano, Violin" in odd["options"].tolist()  # a string stays as it was
    summary = pd.read_parquet(out / "summary.parquet")
    assert set(summary["n"]) == {1}  # only q1 of m1 is scored


def test_all_rows_bad(tmp_path: Path) -> None:
    rows = [dict(r, response=None) for r in example_rows()[:2]] + ["17"]
    out = tmp_path / "out"
    res = run(write_jsonl(tmp_path / "in.jsonl", rows), "--out", str(out), "--resamples", "20")
    assert res.exit_code == 4, res.output  # nothing could be scored (the outputs are still written)
    assert "rows: 3 in = 0 scored + 3 errored" in res.stderr
    assert "nothing could be scored; top reasons: no response ×2" in res.stderr
    assert pd.read_parquet(out / "summary.parquet").empty
    assert "(no scored rows)" in (out / "report.md").read_text()


def test_parser_choice_changes_a_trap(tmp_path: Path) -> None:
    row = dict(example_rows()[3], response="A guitar plays the main melody.")  # q2: option A is "Happy"
    src = write_jsonl(tmp_path / "in.jsonl", [row])
    for parser, expected in (("strict", -1), ("muchomusic", 0)):
        out = tmp_path / parser
        res = run(src, "--out", str(out), "--parser", parser, "--resamples", "20")
        assert res.exit_code == 0, res.output
        per_item = pd.read_parquet(out / "per_item.parquet")
        assert per_item["parsed_index"].tolist() == [expected]
        assert per_item["correct"].tolist() == [expected == 0]


def test_argument_errors_exit_nonzero(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", example_rows())
    res = run(src, "--out", str(tmp_path / "o"), "--parser", "fuzzy")
    assert res.exit_code == 2 and "unknown parser 'fuzzy'" in res.stderr
    res = run(src, "--out", str(tmp_path / "o"), "--parser", "llm", "--llm-model", "m")
    assert res.exit_code == 2 and "--llm-base-url" in res.stderr
    res = run(src, "--out", str(tmp_path / "o"), "--parser", "llm", "--llm-base-url", "http://127.0.0.1:9/v1")
    assert res.exit_code == 2 and "--llm-model" in res.stderr
    res = run(src, "--out", str(tmp_path / "o"), "--breakdown", "nope")
    assert res.exit_code == 2 and "--breakdown" in res.stderr and "nope" in res.stderr
    res = run(src, "--out", str(tmp_path / "o"), "--group-by", "model", "--breakdown", "model")
    assert res.exit_code == 2 and "both --group-by and --breakdown" in res.stderr
    res = run(src, "--out", str(tmp_path / "o"), "--group-by", "nope")
    assert res.exit_code != 0 and "nope" in res.stderr
    res = run(str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"))
    assert res.exit_code != 0 and "cannot read" in res.stderr
    missing_col = write_jsonl(tmp_path / "nocol.jsonl", [{"question_id": "q", "order_id": 0}])
    res = run(missing_col, "--out", str(tmp_path / "o"))
    assert res.exit_code != 0 and "missing required column" in res.stderr
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- breakdowns and parser agreement

CATEGORY = {"q1": "instrument", "q2": "mood", "q3": "mood"}
DIFFICULTY = {"q1": "easy", "q2": "easy", "q3": "hard"}
SECONDARY = {"q1": ["timbre", "texture"], "q2": ["texture"], "q3": []}  # q3: no value, counted nowhere
# Hand computation per breakdown value (per-order accuracies over that value's questions):
# m1 category=instrument (q1): orders 1, 1, 1 → mean 1, SD 0; consistency 1; IFR 1
# m1 category=mood (q2, q3): orders (✓✓)=1, (✗✗)=0, (✓,unanswered)=1/2 → mean 1/2, SD 1/2; consistency 0; IFR 5/6
# m2 category=instrument (q1): 0, 0, 0 → mean 0, SD 0; consistency 1; IFR 1
# m2 category=mood (q2, q3): 1, 1/2, 1/2 → mean 2/3, deviations 1/3, -1/6, -1/6 → var 1/12; consistency 1/2
# m1 difficulty=easy (q1, q2): 1, 1/2, 1 → mean 5/6, var (1/36 + 4/36 + 1/36)/2 = 1/12; consistency 1/2
# m1 difficulty=hard (q3): 1, 0, 0 → mean 1/3, var (4/9 + 1/9 + 1/9)/2 = 1/3; consistency 0; IFR 2/3
# secondary (list column, one row per value): texture = q1, q2 (= easy); timbre = q1 (= instrument)
BREAKDOWN = {
    ("m1", "category=instrument"): dict(accuracy_mean=1.0, accuracy_sd=0.0, consistency=1.0, ifr=1.0, n=1),
    ("m1", "category=mood"): dict(accuracy_mean=0.5, accuracy_sd=0.5, consistency=0.0, ifr=5 / 6, n=2),
    ("m2", "category=instrument"): dict(accuracy_mean=0.0, accuracy_sd=0.0, consistency=1.0, ifr=1.0, n=1),
    ("m2", "category=mood"): dict(accuracy_mean=2 / 3, accuracy_sd=math.sqrt(1 / 12), consistency=0.5, ifr=1.0,
                                  n=2),
    ("m1", "difficulty=easy"): dict(accuracy_mean=5 / 6, accuracy_sd=math.sqrt(1 / 12), consistency=0.5, ifr=1.0,
                                    n=2),
    ("m1", "difficulty=hard"): dict(accuracy_mean=1 / 3, accuracy_sd=math.sqrt(1 / 3), consistency=0.0,
                                    ifr=2 / 3, n=1),
    ("m1", "secondary=texture"): dict(accuracy_mean=5 / 6, accuracy_sd=math.sqrt(1 / 12), consistency=0.5,
                                      ifr=1.0, n=2),
    ("m1", "secondary=timbre"): dict(accuracy_mean=1.0, accuracy_sd=0.0, consistency=1.0, ifr=1.0, n=1),
}


def breakdown_rows() -> list[dict]:
    return [dict(r, category=CATEGORY[r["question_id"]], difficulty=DIFFICULTY[r["question_id"]],
                 secondary=SECONDARY[r["question_id"]]) for r in example_rows()]


def test_breakdown_rows_by_hand(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", breakdown_rows())
    out = tmp_path / "out"
    res = run(src, "--out", str(out), "--breakdown", "category, difficulty,secondary", "--resamples", "50")
    assert res.exit_code == 0, res.output
    s = pd.read_parquet(out / "summary.parquet")
    # breakdown columns are not default group columns; the main rows are unchanged
    assert list(s.columns) == ["model", "condition", "breakdown", "metric", "value", "ci_low", "ci_high", "n",
                               "definition"]
    main = s[s["breakdown"] == "all"]
    assert len(main) == 8
    for r in main.itertuples(index=False):
        assert r.value == pytest.approx(EXPECTED[r.model][r.metric]), (r.model, r.metric)
    assert set(s["breakdown"]) == {"all", "category=instrument", "category=mood", "difficulty=easy",
                                   "difficulty=hard", "secondary=texture", "secondary=timbre"}
    assert len(s) == 8 * 7  # 2 models x 7 blocks x 4 metrics
    got = {(r.model, r.breakdown, r.metric): r for r in s.itertuples(index=False)}
    for (model, bd), metrics in BREAKDOWN.items():
        n = metrics.pop("n")
        for metric, value in metrics.items():
            assert got[model, bd, metric].value == pytest.approx(value), (model, bd, metric)
            assert got[model, bd, metric].n == n
        metrics["n"] = n
    report = (out / "report.md").read_text()
    assert "| model=m1, condition=correct | 3 | 0.667 ± 0.333 | 0.333 | 0.889 |" in report
    assert "| model=m1, condition=correct, category=mood | 2 | 0.500 ± 0.500 | 0.000 | 0.833 |" in report
    assert "| model=m2, condition=correct, category=mood | 2 | 0.667 ± 0.289 | 0.500 | 1.000 |" in report


def test_breakdown_without_groups_and_with_no_scored_rows(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", breakdown_rows())
    res = run(src, "--out", str(tmp_path / "o"), "--group-by", "", "--breakdown", "difficulty", "--resamples", "20")
    assert res.exit_code == 0, res.output
    s = pd.read_parquet(tmp_path / "o" / "summary.parquet").set_index(["breakdown", "metric"])
    # both models pooled: hard = q3 over 2 models; m1 q3 = 1/3, m2 q3 = 1/3 → 1/3; IFR 5/6
    assert s.loc[("difficulty=hard", "accuracy_mean"), "value"] == pytest.approx(1 / 3)
    assert s.loc[("difficulty=hard", "ifr"), "value"] == pytest.approx(5 / 6)
    assert s.loc[("all", "ifr"), "value"] == pytest.approx(17 / 18)
    assert "| difficulty=hard |" in (tmp_path / "o" / "report.md").read_text()
    bad = [dict(r, response=None) for r in breakdown_rows()[:2]]
    res = run(write_jsonl(tmp_path / "bad.jsonl", bad), "--out", str(tmp_path / "b"), "--breakdown", "category",
              "--resamples", "20")
    assert res.exit_code == 4, res.output  # nothing could be scored
    assert pd.read_parquet(tmp_path / "b" / "summary.parquet").empty


def test_report_has_strict_vs_muchomusic_agreement(tmp_path: Path) -> None:
    rows = example_rows()
    rows[0] = dict(rows[0], response="A guitar plays the main melody.")  # strict: unanswered; muchomusic: A
    rows.append(dict(rows[1], response=None))  # an input error: not compared
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    for parser in ("strict", "muchomusic"):
        out = tmp_path / parser
        res = run(src, "--out", str(out), "--parser", parser, "--resamples", "20")
        assert res.exit_code == 0, res.output
        # 17 of the 18 valid responses parse alike ("(A)" forms agree; "I cannot tell." is -1 for both)
        assert "- parser agreement strict vs muchomusic: 0.944 over 18 responses" in (out / "report.md").read_text()
    res = run(write_jsonl(tmp_path / "bad.jsonl", [rows[-1]]), "--out", str(tmp_path / "b"), "--resamples", "20")
    assert "- parser agreement strict vs muchomusic: – over 0 responses" in (tmp_path / "b" / "report.md").read_text()
