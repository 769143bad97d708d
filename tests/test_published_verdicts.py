"""The published verdict by default, evalcore's strict reading beside it: from the judged rows of a published rule's
judge (MMAR's, on responses built here) through the scoring stage to the summary (``accuracy``, ``accuracy_strict``,
``verdicts_differ``, their paired differences and error-counting twins), the report (the one line per model saying
how much of the published figure rests on the quirks, the counts in the protocol's table, the audio-attention and
breakdown tables), the model card, the listening verdict (which reads the strict figure) and the item browser's
selection of exactly the items that differ. A protocol of evalcore's own rule (``mcq_string``) beside it keeps one
figure and its definitions as they were."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evalcore.judges.mcq_string import McqStringJudge
from evalcore.judges.mmar import McqMmarJudge
from evalcore.reports import browser, browser_rows, markdown, model_card, readings
from evalcore.reports.browser_links import verdicts_href, verdicts_key
from evalcore.reports.verdict import listening_rows, verdicts
from evalcore.core.schema import VERDICTS_DIFFER, quirks_of, strict_name
from evalcore.scorers.mcq import MCQScorer
from evalcore.scoring.requests import merge_chunks, score_requests
from evalcore.scoring.summary import summary_table

LOUDNESS = ["From quiet to loud", "From loud to quiet", "Remains unchanged"]
N = 30  # questions


def _correct(q: int) -> int:
    """The answer: "From quiet to loud" on every third question, else "Remains unchanged"."""
    return 0 if q % 3 == 0 else 2


def _answer(model: str, cond: str, q: int) -> str:
    """``hedger`` names the other of the two same-words options ("From loud to quiet") on every third question
    whatever it hears; otherwise the answer with the correct audio and "From quiet to loud" under silence.
    ``plain`` names "Remains unchanged" with the correct audio where it is the answer, else nothing."""
    if model == "hedger":
        if q % 3 == 0:
            return "From loud to quiet"
        return LOUDNESS[_correct(q)] if cond == "correct" else "From quiet to loud"
    return "Remains unchanged" if cond == "correct" and _correct(q) == 2 else "I cannot hear anything."


def judged_rows(protocol: str = "mmar", judge=None) -> list[dict]:
    judge = judge or McqMmarJudge()
    rows = []
    for q in range(N):
        for model in ("hedger", "plain"):
            for cond in ("correct", "silence"):
                text = _answer(model, cond, q)
                (got,) = judge.judge([text], [LOUDNESS])
                rows.append({"request_id": f"{protocol}-{model}-{cond}-{q}", "dataset": "mmar-music", "item_id": f"q{q}",
                             "protocol": protocol, "protocol_kind": "mcq", "model": model, "condition": cond,
                             "variant": "default", "option_order": 0, "task": "music", "category": None,
                             "difficulty": None, "audio_item_id": f"q{q}", "clip_id": f"q{q}", "text": text,
                             "options": LOUDNESS, "correct_index": _correct(q), "judge": f"{judge.name}@{judge.version}",
                             "metadata": json.dumps({}), "error": None, **got})
    return rows


@pytest.fixture(scope="module")
def run() -> dict:
    rows = judged_rows() + judged_rows("strict-mcq", McqStringJudge())
    errored = {**rows[0], "request_id": "mmar-hedger-correct-err", "item_id": "q99", "error": "decode failed",
               "error_stage": "decode", "parsed_index": None, "credited": None}
    scored = score_requests(merge_chunks([dict(r) for r in rows]))
    summary = summary_table(scored.per_item, resamples=200, confidence=0.95, seed=0, errors=[errored]).to_pandas()
    return {"per_item": scored.per_item, "summary": markdown.with_kinds(summary)}


def _value(summary: pd.DataFrame, protocol: str, model: str, cond: str, metric: str, kind: str = "value"):
    s = summary[(summary.protocol == protocol) & (summary.model == model) & (summary.condition == cond)
                & (summary.metric == metric) & (summary.group == "all") & (summary.kind == kind)]
    assert len(s) == 1, (protocol, model, cond, metric, kind)
    return s.iloc[0]


def test_per_item_rows_carry_both_verdicts(run) -> None:
    pi = run["per_item"]
    mmar, own = pi[pi.protocol == "mmar"], pi[pi.protocol == "strict-mcq"]
    hedged = mmar[(mmar.model == "hedger") & (mmar.item_id.isin([f"q{q}" for q in range(0, N, 3)]))]
    # "From loud to quiet" names both same-words options: credited by the published rule whatever the answer is
    assert (hedged["correct"] == 1.0).all() and (hedged["correct_strict"] == 0.0).all()
    assert (mmar["correct"] >= mmar["correct_strict"]).all()
    assert own["correct_strict"].isna().all()  # evalcore's own rule: one verdict


def test_summary_has_the_published_figure_and_the_strict_one_beside_it(run) -> None:
    s = run["summary"]
    acc = _value(s, "mmar", "hedger", "correct", "accuracy")
    strict = _value(s, "mmar", "hedger", "correct", "accuracy_strict")
    differ = _value(s, "mmar", "hedger", "correct", VERDICTS_DIFFER)
    hedged = len(range(0, N, 3))
    assert acc["value"] == pytest.approx(1.0) and strict["value"] == pytest.approx(1 - hedged / N)
    assert (differ["value"], differ["n"]) == (hedged, N)
    assert "github.com/ddlBoJack/MMAR" in acc["definition"] and "accuracy_strict" in acc["definition"]
    assert "strict reading" in strict["definition"]
    assert quirks_of(differ["definition"]) == "the same-words or wordless-choice rule"
    # the silence cell: 10 hedges credited by the rule, 20 "From quiet to loud" wrong by both
    assert _value(s, "mmar", "hedger", "silence", VERDICTS_DIFFER)["value"] == hedged
    assert _value(s, "mmar", "plain", "correct", VERDICTS_DIFFER)["value"] == 0
    # the paired differences of both, McNemar's exact test on each (0/1 outcomes)
    for metric in ("accuracy", "accuracy_strict"):
        assert _value(s, "mmar", "hedger", "correct-silence", metric, "paired_diff")["test"] == "mcnemar_exact"
    # errored requests counted as wrong by both verdicts
    for metric in ("accuracy_with_errors", strict_name("accuracy_with_errors")):
        row = _value(s, "mmar", "hedger", "correct", metric)
        assert row["n"] == N + 1
    # evalcore's own rule: no strict twin, no count, the definitions as they were
    own = s[s.protocol == "strict-mcq"]
    assert not own["metric"].isin(["accuracy_strict", VERDICTS_DIFFER]).any()
    assert set(own.loc[(own.metric == "accuracy") & (own.kind == "value"), "definition"]) == {
        MCQScorer.aggregates[0].definition}


def test_the_listening_verdict_reads_the_strict_figure(run) -> None:
    s = run["summary"]
    rows = listening_rows(s)
    assert set(rows.loc[rows.protocol == "mmar", "metric"]) == {"accuracy_strict"}
    assert set(rows.loc[rows.protocol == "strict-mcq", "metric"]) == {"accuracy"}
    hedger = next(v for v in verdicts(s) if v.model == "hedger")
    assert "mmar · mmar-music accuracy_strict correct − silence +0.667" in hedger.because()


def test_the_report_says_how_much_rests_on_the_quirks(run) -> None:
    meta = {"name": "t", "version": "x", "root": "/r", "created": "now", "resamples": 200, "confidence": 0.95,
            "seed": 0, "min_items": 20}
    counts = {"items_in": N, "items_valid": N, "items_errored": 0, "requests_in": 4 * N, "requests_scored": 4 * N,
              "requests_errored": 0}
    report = markdown.render(meta, counts, run["summary"], pd.DataFrame())
    section = report.split("## Published rule and strict reading", 1)[1].split("\n## ", 1)[0]
    href = verdicts_href("mmar", "mmar-music", "hedger", "default", "correct")
    line = next(ln for ln in section.splitlines() if "hedger" in ln)
    assert "accuracy 100.0 % by the published rule, 66.7 % by evalcore's strict reading" in line
    assert f"[10 of 30]({href}) items judged differently, credited by the same-words or wordless-choice rule" in line
    assert "+33.3 points of the published 100.0 % rest on it" in line
    assert "silence [10 of 30](" in section  # the controls' counts, linked too
    assert "plain, correct audio" in section and "the two verdicts agree on all 30 items" in section
    assert "strict-mcq" not in section
    table = report.split("## mmar · mmar-music", 1)[1].split("\n## ", 1)[0]
    header = next(ln for ln in table.splitlines() if ln.startswith("| model |"))
    assert "| accuracy |" in header and "| accuracy_strict |" in header and f"| {VERDICTS_DIFFER} |" in header
    assert f"[10 of 30]({href})" in table
    attention = report.split("## Audio-attention test · mmar · mmar-music", 1)[1].split("\n## ", 1)[0]
    assert "by evalcore's strict reading of the published rule (accuracy_strict" in attention
    assert "correct-silence (strict)" in attention
    listening = report.split("## Does the model listen? Every paired difference", 1)[1].split("\n## ", 1)[0]
    assert "| accuracy_strict |" in listening


def test_the_model_card_shows_both_figures_and_the_count(run) -> None:
    _, rows = model_card.cells(run["summary"])
    mmar = next(r for r in rows if r[0].startswith("mmar-music (mmar)"))
    models, _ = model_card.cells(run["summary"])
    hedger = mmar[3 + models.index("hedger")]  # benchmark, task, metric, then the models
    href = verdicts_href("mmar", "mmar-music", "hedger", "default", "correct")
    assert hedger.startswith("1.000") and f" · strict 0.667 · [10 differ]({href})" in hedger
    assert mmar[3 + models.index("plain")].endswith(" · strict 0.667 · 0 differ")  # equal, no link
    own = next(r for r in rows if r[0].startswith("mmar-music (strict-mcq)"))
    assert all("strict" not in c for c in own[3:])


def test_the_browser_selects_exactly_the_items_that_differ(run) -> None:
    pi = run["per_item"].assign(error=None, ordinal=lambda d: d["item_id"].str[1:].astype(int))
    req = browser_rows.label(pi)
    assert (req.loc[(req.protocol == "mmar") & (req.correct == 1.0), "outcome"] == "right").all()  # credited: right
    req["verdict_note"] = browser_rows.verdict_notes(req)
    entries = {e["key"]: e for e in browser.verdict_entries(req)}
    key = verdicts_key("mmar", "mmar-music", "hedger", "default", "correct")
    assert set(entries) == {key, verdicts_key("mmar", "mmar-music", "hedger", "default", "silence")}
    assert entries[key]["items"] == list(range(0, N, 3))
    assert entries[key]["changes"]["0"] == "hedger, correct audio: published rule: right · strict reading: wrong"
    assert verdicts_href("mmar", "mmar-music", "hedger", "default", "correct").startswith(
        "items.html#sel=verdicts%3Ammar%7Cmmar-music%7Chedger%7Cdefault%7Ccorrect&m=hedger")


def test_readings_pairs_need_both_figures() -> None:
    assert readings.pairs(pd.DataFrame()) == {}


def test_the_nightly_and_compare_compare_both_figures(run, tmp_path) -> None:
    """``evalcore compare`` and the nightly read both per-item verdicts: ``accuracy`` and ``accuracy_strict`` rows,
    each with McNemar's exact test (0/1 outcomes); a run of evalcore's own rule has ``accuracy`` alone."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from evalcore.nightly import compare

    pi = run["per_item"]
    for name, df in (("cur", pi), ("ref", pi.assign(correct_strict=pi["correct"]))):  # ref: the quirks never matter
        (tmp_path / name / "tables").mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(df.drop(columns=["options"]), preserve_index=False),
                       tmp_path / name / "tables" / "per_item.parquet")
    cur, ref = (compare.load_scores(str(tmp_path / n)) for n in ("cur", "ref"))
    rows = compare.compare_scores(cur, ref, 100, 0.95, 0)
    mmar = rows[(rows.protocol == "mmar") & (rows.model == "hedger") & (rows.condition == "correct")]
    assert set(mmar["metric"]) == {"accuracy", "accuracy_strict"}
    strict = mmar[mmar.metric == "accuracy_strict"].iloc[0]
    assert strict["delta"] == pytest.approx(-len(range(0, N, 3)) / N) and strict["test"] == "mcnemar_exact"
    assert mmar[mmar.metric == "accuracy"].iloc[0]["delta"] == 0
    assert set(rows.loc[rows.protocol == "strict-mcq", "metric"]) == {"accuracy"}


def test_a_resumed_run_mixing_judge_versions_keeps_a_whole_strict_figure() -> None:
    """Rows judged before the published verdict was added (``mcq_mmar@1``: no ``credited``) have one verdict, the
    strict one: the strict figure counts them as they were, the published one as the best it knows."""
    rows = judged_rows()
    for r in rows[: len(rows) // 2]:
        r.update(credited=None, judge="mcq_mmar@1")
    per_item = score_requests(merge_chunks(rows)).per_item
    assert per_item["correct_strict"].isna().sum() == len(rows) // 2
    s = summary_table(per_item, resamples=50, confidence=0.95, seed=0).to_pandas()
    strict = s[(s.metric == "accuracy_strict") & (s.kind == "value") & (s.group == "all")]
    assert len(strict) == 4 and strict["value"].notna().all()
    everything = score_requests(merge_chunks(judged_rows())).per_item
    want = summary_table(everything, resamples=50, confidence=0.95, seed=0).to_pandas()
    want = want[(want.metric == "accuracy_strict") & (want.kind == "value") & (want.group == "all")]
    assert strict["value"].tolist() == want["value"].tolist()  # the strict figure does not depend on the version


def test_the_page_is_written_with_the_selection_and_items_that_failed_to_load(run, tmp_path) -> None:
    """``items.html`` of a run with an item that failed to load (no options: a NaN in the items table, which
    stopped the page before) and a published rule's differing verdicts: ``browser/sel-verdicts.js`` holds an entry
    per differing cell, found by its key, and each differing answer carries its note."""
    from evalcore.reports.browser import BrowserInput, write

    pi = run["per_item"]
    req = pi.assign(error=None, error_stage=None, error_class=None, question="Loudness?", clip=None)
    items = pd.DataFrame({"dataset": "mmar-music", "item_id": [f"q{q}" for q in range(N)],
                          "options": [LOUDNESS] * N, "correct_option": [_correct(q) for q in range(N)]})
    bad = [{"protocol": None, "dataset": "mmar-music", "item_id": "q-bad", "error_stage": "load",
            "error_class": "input", "error": "answer is not one of its choices"}]
    write(str(tmp_path), BrowserInput(requests=req, items=items, item_errors=bad, metric_columns=["correct"]))
    text = (tmp_path / "browser" / "sel-verdicts.js").read_text()
    sel = json.loads(text[text.index(",") + 1:text.rindex(")")])
    keys = [e["key"] for e in sel["entries"]]
    assert keys == [verdicts_key("mmar", "mmar-music", "hedger", "default", c) for c in ("correct", "silence")]
    assert all(len(e["items"]) == len(range(0, N, 3)) for e in sel["entries"])
    shard = (tmp_path / "browser" / "data" / "00000.js").read_text()
    assert "published rule: right · strict reading: wrong" in shard  # the answers' own notes (vd)
