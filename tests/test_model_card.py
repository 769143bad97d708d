"""The model card on small summaries (no run): one column per model (entries of one model are one column), rows
grouped multiple choice / MIR / captioning naming their task, each row its benchmark's own metric, a benchmark whose
every request errored shown as "—, all N errored" (never 0.000 of another metric), published reference columns
whatever models the run evaluates with their sources, and stand-ins marked; the report puts the card right after
the verdict, and the page draws the verdict per model and benchmark after it, every difference behind a toggle.
The error budget per benchmark: a benchmark whose every request errored ends the run with exit 4 naming it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from evalcore.reports import markdown, model_card, report_html

CONDITIONS = ("correct", "silence")


def _value(proto, ds, model, cond, metric, value, n, kind, lo=None, hi=None):
    return {"protocol": proto, "dataset": ds, "model": model, "variant": "default", "condition": cond,
            "group": "all", "kind": "value", "metric": metric, "value": value,
            "ci_low": value - 0.1 if lo is None else lo, "ci_high": value + 0.1 if hi is None else hi, "n": n,
            "definition": f"{metric} def", "protocol_kind": kind}


def _diff(proto, ds, model, metric, value, n, kind, lo, hi):
    return {**_value(proto, ds, model, "correct-silence", metric, value, n, kind, lo, hi), "kind": "paired_diff"}


def summary() -> pd.DataFrame:
    """mmau (mcq) answered by the stand-in of qwen2 (entry ``mmau.qwen2``) and the listener; mmau-pro (mcq) whose
    every request errored (a judge that raised); cmi-gtzan and cmi-dsing (mir, lyrics: its figures are
    word_accuracy first and wer); cmi-sdd captions (freeform)."""
    rows = []
    for model, acc in (("mmau.qwen2", 0.6), ("listener", 0.4)):
        for cond in CONDITIONS:
            rows.append(_value("mmau", "mmau-test-mini", model, cond, "accuracy", acc, 30, "mcq"))
            rows.append(_value("mmau", "mmau-test-mini", model, cond, "errored", 0.0, 0, "mcq", math.nan, math.nan))
        rows.append(_diff("mmau", "mmau-test-mini", model, "accuracy", 0.2, 30, "mcq", 0.05, 0.35))
    for model in ("mmau-pro.qwen2", "listener"):
        for cond in CONDITIONS:  # every request errored: errored and accuracy_with_errors over the errored items only
            rows.append(_value("mmau-pro", "mmau-pro-music", model, cond, "errored", 30.0, 30, "mcq", math.nan,
                               math.nan))
            rows.append(_value("mmau-pro", "mmau-pro-music", model, cond, "accuracy_with_errors", 0.0, 15, "mcq", 0.0,
                               0.0))
    for model in ("qwen2", "listener"):
        rows.append(_value("cmi", "cmi-gtzan", model, "correct", "accuracy", 0.5, 2, "mir"))
        rows.append(_value("cmi", "cmi-dsing", model, "correct", "word_accuracy", 0.3, 2, "mir"))
        rows.append(_value("cmi", "cmi-dsing", model, "correct", "wer", 0.7, 2, "mir"))
        rows.append(_value("cmi-captions", "cmi-sdd", model, "correct", "bleu", 0.1, 2, "freeform"))
        rows.append(_diff("cmi", "cmi-gtzan", model, "accuracy", 0.0, 2, "mir", -0.5, 0.5))
    return pd.DataFrame(rows)


BENCHMARKS = [
    {"protocol": "mmau", "dataset": "mmau-test-mini", "kind": "mcq", "tasks": ["music"], "categories": [],
     "figures": ["accuracy", "ifr", "consistency"], "stand_in": None, "requests_in": 120, "requests_errored": 0,
     "top_reasons": []},
    {"protocol": "mmau-pro", "dataset": "mmau-pro-music", "kind": "mcq", "tasks": ["music"], "categories": [],
     "figures": ["accuracy", "ifr", "consistency"], "stand_in": None, "requests_in": 120, "requests_errored": 120,
     "top_reasons": [["judge/OSError", 120]]},
    {"protocol": "cmi", "dataset": "cmi-gtzan", "kind": "mir", "tasks": ["GTZAN"], "categories": ["cmi_multiclass"],
     "figures": ["accuracy", "answered"], "stand_in": None, "requests_in": 4, "requests_errored": 0, "top_reasons": []},
    {"protocol": "cmi", "dataset": "cmi-dsing", "kind": "mir", "tasks": ["DSing"], "categories": ["cmi_lyrics"],
     "figures": ["word_accuracy", "wer", "cer"], "stand_in": None, "requests_in": 4, "requests_errored": 0,
     "top_reasons": []},
    {"protocol": "cmi", "dataset": "cmi-mtg-genre", "kind": "mir", "tasks": ["MTG_genre"], "categories": ["cmi_tagging"],
     "figures": ["tag_answered", "roc_auc", "pr_auc"], "stand_in": "bag-of-words stand-in for GTE-Qwen2-7B-instruct",
     "requests_in": 4, "requests_errored": 0, "top_reasons": []},
    {"protocol": "cmi-captions", "dataset": "cmi-sdd", "kind": "freeform", "tasks": ["SDD"], "categories": [],
     "figures": ["bleu", "meteor"], "stand_in": None, "requests_in": 4, "requests_errored": 0, "top_reasons": []},
]
CARD = {"columns": {"mmau.qwen2": "qwen2", "mmau-pro.qwen2": "qwen2", "qwen2": "qwen2", "listener": "listener"},
        "values": [{"dataset": "cmi-gtzan", "model": "qwen2-audio-7b-instruct", "metric": "accuracy", "value": "0.624",
                    "source": "released evaluate.py", "note": ""},
                   {"dataset": "mmau-test-mini", "model": "salmonn", "metric": "accuracy", "value": "0.5",
                    "source": "a paper", "note": "music only"},
                   {"dataset": "cmi-dsing", "model": "salmonn", "metric": "wer", "value": "8.16",
                    "source": "released evaluate.py", "note": ""}]}


def test_one_column_per_model_rows_grouped_each_with_its_task_and_own_metric() -> None:
    card = model_card.build(summary(), CARD, 20, (), BENCHMARKS)
    assert card.models == ["listener", "qwen2"]  # mmau.qwen2, mmau-pro.qwen2 and qwen2: one column
    assert card.published == ["qwen2-audio-7b-instruct", "salmonn"]
    assert card.header == ["benchmark", "task", "metric", "listener", "qwen2", "qwen2-audio-7b-instruct (published)",
                           "salmonn (published)"]
    got = [(r.group, r.benchmark, r.task, r.metric) for r in card.rows]
    assert got == [("Multiple-choice benchmarks", "mmau-test-mini (mmau)", "music", "accuracy"),
                   ("Multiple-choice benchmarks", "mmau-pro-music (mmau-pro)", "music", "accuracy"),
                   ("MIR tasks (CMI-Bench)", "cmi-dsing (cmi)", "DSing · lyrics transcription", "wer"),
                   ("MIR tasks (CMI-Bench)", "cmi-gtzan (cmi)", "GTZAN · classification", "accuracy"),
                   ("MIR tasks (CMI-Bench)", "cmi-mtg-genre (cmi)", "MTG_genre · tagging", "roc_auc ‡"),
                   ("Captioning", "cmi-sdd (cmi-captions)", "SDD · captioning", "bleu")]
    assert card.rows[4].cells[:2] == ["—", "—"]  # a benchmark of the run with no row for these models
    mmau = card.rows[0].cells
    assert mmau[1].startswith("0.600 [0.500, 0.700] ✓") and mmau[0].startswith("0.400 [0.300, 0.500] ✓")
    assert mmau[2] == "—" and mmau[3] == "0.500 [2]"  # salmonn's paper value, whatever models ran
    assert card.rows[3].cells[2] == "0.624 [1]" and card.rows[3].cells[0].endswith("?")  # 2 items: too few
    assert card.rows[2].cells[3] == "8.160 [1]"  # the published WER beside the run's WER
    assert card.sources == ["released evaluate.py", "a paper (music only)"]


def test_a_benchmark_whose_every_request_errored_shows_no_number() -> None:
    """The issue's MMAU-Pro row read ``accuracy_with_errors 0.000 [0.000, 0.000]`` over n = 0."""
    card = model_card.build(summary(), CARD, 20, (), BENCHMARKS)
    dead = card.rows[1]
    assert dead.metric == "accuracy" and dead.cells[:2] == ["—, all 30 errored", "—, all 30 errored"]
    assert not [c for r in card.rows for c in r.cells if "0.000 [0.000, 0.000]" in c]
    # without run.json's benchmarks (a run before them): still the kind's own metric, never the …_with_errors one
    old = model_card.build(summary(), CARD, 20, (), [])
    (row,) = [r for r in old.rows if r.benchmark.startswith("mmau-pro-music")]
    assert row.metric == "accuracy" and row.cells[0] == "—, all 30 errored"
    section = "\n".join(model_card.section(summary(), CARD, 20, (), BENCHMARKS))
    assert "⚠ **No score on mmau-pro · mmau-pro-music**: every one of its 120 requests errored (judge/OSError ×120)" \
        in section
    assert "| **Multiple-choice benchmarks** |" in section and "Published values (columns marked published" in section
    assert "[1] released evaluate.py; [2] a paper (music only)" in section


def test_a_stand_in_is_said_on_its_row() -> None:
    s = summary()
    s = pd.concat([s, pd.DataFrame([_value("cmi", "cmi-mtg-genre", "qwen2", "correct", "roc_auc", 0.5, 2, "mir")])])
    card = model_card.build(s, CARD, 20, (), BENCHMARKS)
    (row,) = [r for r in card.rows if r.key == ("cmi", "cmi-mtg-genre")]
    assert row.metric == "roc_auc ‡" and row.task == "MTG_genre · tagging"
    assert card.stand_ins == ["bag-of-words stand-in for GTE-Qwen2-7B-instruct"]
    assert "‡ Scored with a stand-in" in "\n".join(model_card.section(s, CARD, 20, (), BENCHMARKS))


def test_the_report_opens_with_the_verdict_then_the_card_and_the_page_summarises_the_plot() -> None:
    meta = {"name": "card", "confidence": 0.95, "model_card": CARD, "benchmarks": BENCHMARKS}
    counts = {"items_in": 10, "items_valid": 10, "items_errored": 0, "requests_in": 256, "requests_scored": 136,
              "requests_errored": 120}
    md = markdown.render(meta, counts, summary(), pd.DataFrame(columns=["table", "error_stage", "error_class", "error"]))
    heads = [ln for ln in md.splitlines() if ln.startswith("## ")]
    assert heads[:3] == ["## Does it listen?", "## Model card", "## Counts"]
    assert "Errored requests by benchmark: mmau-pro · mmau-pro-music 120 of 120 (100.0%)." in md
    assert "⚠ **benchmark mmau-pro · mmau-pro-music: every one of its 120 requests errored (judge/OSError ×120)**" in md
    page = report_html.render(md, markdown.with_kinds(summary()), 20, (), CARD, BENCHMARKS)
    card_at, verdict_at = page.index("<h2>Model card</h2>"), page.index("<h2>Does it listen?</h2>")
    first_figure = page.index("<figure")
    assert verdict_at < card_at < first_figure  # no plot between the verdict and the card
    assert "The listening verdict by model and benchmark" in page[first_figure:first_figure + 200_000]
    assert "<details><summary>Every paired difference (" in page


@pytest.mark.parametrize("errored, raises", [(120, True), (59, False)])
def test_the_error_budget_holds_per_benchmark(errored: int, raises: bool) -> None:
    from evalcore.pipeline.outcome import ErrorBudgetExceeded, RunResult, check_error_budget

    counts = {"items_in": 10, "items_errored": 0, "requests_in": 1000, "requests_errored": errored,
              "models": {"m": {"requests_in": 1000, "requests_errored": errored,
                               "error_share": errored / 1000}}}
    rows = [{"protocol": "mmau-pro", "dataset": "mmau-pro-music", "model": "m", "error_stage": "judge",
             "error": "OSError: no model at /models/nv-embed"} for _ in range(errored)]
    bench = [{**BENCHMARKS[1], "requests_errored": errored}, BENCHMARKS[0]]
    result = RunResult(root="/r", counts=counts, report="")
    if not raises:  # 59 of 120 is under half: within the default budget
        check_error_budget(result, rows, 0.5, benchmarks=bench)
        return
    with pytest.raises(ErrorBudgetExceeded) as e:
        check_error_budget(result, rows, 0.5, benchmarks=bench)
    assert e.value.benchmark == ("mmau-pro", "mmau-pro-music")
    msg = str(e.value)
    assert msg.startswith("error budget exceeded: benchmark mmau-pro · mmau-pro-music errored on 120 of 120 of its "
                          "requests (every one of its requests: it has no score) (100.0%) > max_error_rate 50.0%")
    assert "top reasons: judge/OSError ×120" in msg
