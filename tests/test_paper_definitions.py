"""Definitions held against the papers' own rules and numbers: binary-choice P/R/F1 (factual paper, Tables 7
and 13), MuChoMusic's Knowledge / Reasoning / genre accuracies (its released scorer), explicit denominators
and HumMusQA's category-share rule."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from evalcore.judges.mcq_muchomusic import parse_muchomusic
from evalcore.judges.yes_no import BinaryChoiceJudge
from evalcore.reports.mcq import breakdown_sections
from evalcore.scoring.requests import merge_chunks, per_item_table
from evalcore.scoring.summary import summary_table


def _values(summary: pd.DataFrame, **where) -> dict[str, float]:
    s = summary[(summary["kind"] == "value")]
    for k, v in where.items():
        s = s[s[k] == v]
    return dict(zip(s["metric"], s["value"]))


# ----------------------------------------------------------------------- binary choice (factual paper)

#: (answer, presented options, correct index): names the right option, the wrong one, both (twice), neither
BINARY = [("Rock.", ["rock", "pop"], 0),
          ("It sounds like pop to me.", ["jazz", "pop"], 0),
          ("Both folk and rock fit.", ["folk", "rock"], 0),
          ("Between rock and pop, I would say rock and pop.", ["rock", "pop"], 1),
          ("Neither: this is jazz.", ["rock", "folk"], 1)]


def _binary_summary() -> pd.DataFrame:
    judged = BinaryChoiceJudge().judge([a for a, _, _ in BINARY], [o for _, o, _ in BINARY])
    rows = [{"request_id": f"r{i}", "chunk_index": 0, "item_id": f"i{i}", "protocol": "binary_choice",
             "dataset": "fma", "task": "genre-binary", "model": "m", "variant": "binary", "condition": "correct",
             "option_order": 0, "options": o, "correct_index": c, "error": None, "text": a, **j}
            for i, ((a, o, c), j) in enumerate(zip(BINARY, judged))]
    return summary_table(per_item_table(merge_chunks(rows)), resamples=200, confidence=0.95, seed=0).to_pandas()


def test_binary_choice_precision_recall_f1_by_hand() -> None:
    # labels named vs the truth: right {rock}/rock TP; wrong {pop}/jazz FP+FN; both {folk, rock}/folk TP+FP;
    # both {rock, pop}/pop TP+FP (the echo "Between rock and pop," is the question, not the answer);
    # neither {}/folk FN → TP 3, FP 3, FN 2
    v = _values(_binary_summary(), condition="correct", group="all")
    assert v["precision_micro"] == pytest.approx(3 / 6)
    assert v["recall_micro"] == pytest.approx(3 / 5)
    assert v["f1_micro"] == pytest.approx(2 * 3 / (2 * 3 + 3 + 2))
    assert v["recall_micro"] > v["precision_micro"]  # reachable, as in every column of Tables 7 and 13
    # kept beside them: one option read strictly (both / neither = unanswered)
    assert v["accuracy"] == pytest.approx(1 / 5) and v["answered"] == pytest.approx(2 / 5)
    assert v["errored"] == 0


#: the factual paper's binary-choice columns (precision, recall, F1): Table 7 (FMA genres) and 13 (composers)
PUBLISHED = {"table7": [(0.464, 0.740, 0.570), (0.500, 0.590, 0.542), (0.460, 0.853, 0.598)],
             "table13": [(0.496, 0.709, 0.584), (0.570, 0.655, 0.609), (0.463, 0.803, 0.588)]}


def test_binary_choice_f1_is_the_pooled_harmonic_mean_as_published() -> None:
    # every published column's F1 is 2PR / (P + R) of its P and R (to the printed three decimals) ...
    for table, cols in PUBLISHED.items():
        for p, r, f1 in cols:
            assert 2 * p * r / (p + r) == pytest.approx(f1, abs=1.5e-3), (table, p, r)  # P, R, F1 rounded
    # ... which the pooled (micro) F1 is, and a mean of per-item F1s is not
    v = _values(_binary_summary(), condition="correct", group="all")
    p, r = v["precision_micro"], v["recall_micro"]
    assert v["f1_micro"] == pytest.approx(2 * p * r / (p + r))
    per_item_f1 = (1 + 0 + 2 / 3 + 2 / 3 + 0) / 5
    assert per_item_f1 != pytest.approx(2 * p * r / (p + r), abs=0.01)


# ----------------------------------------------------------------------- MuChoMusic (released scorer)

#: eight questions: presented options, the released ``answer_orders``, knowledge / reasoning dimensions, genre
#: and a model output
MUCHO = [
    (["Calm", "Tense", "A piano", "A car"], [0, 1, 2, 3], ["mood and expression"], [], "Folk, World, & Country", "A"),
    (["Flute", "Violin", "Bananas", "Slow"], [1, 0, 3, 2], ["instrumentation"], ["genre and style"], "Classical",
     "The correct answer is: A"),
    (["A guitar", "Rain", "Fast", "Slow"], [2, 3, 0, 1], [], ["tempo"], "Rock", "(C)"),
    (["A dog", "Drums", "A man", "A woman"], [3, 2, 1, 0], ["instrumentation", "vocals"], [], "Pop",
     "I think it is a dog barking"),
    (["Minor", "Loud", "Major", "Blue"], [0, 2, 1, 3], [], ["harmony"], "Classical", "B"),
    (["Ska", "Tea", "Reggae", "Bass"], [1, 3, 0, 2], ["genre and style"], ["genre and style"], "Reggae",
     "none of these"),
    (["Synth", "Happy", "Moon", "Sad"], [2, 0, 3, 1], ["mood and expression"], [], "Folk, World, & Country",
     "slow? Calm? no: D"),
    (["Sand", "March", "Organ", "Waltz"], [3, 1, 2, 0], [], ["tempo", "metre and rhythm"], "Rock", "March"),
]
#: the released scorer (muchomusic_eval/scoring.py: extract_responses, compare_answers, get_knowledge_scores,
#: get_reasoning_scores, get_finegrained_*_scores) run on MUCHO
RELEASED = {"responses": [0, 0, 2, 0, 1, -1, -1, 1], "accuracy": 0.25, "knowledge": 0.2, "reasoning": 0.2,
            "knowledge_fine": {"genre and style": 0.0, "instrumentation": 0.0, "mood and expression": 0.5,
                               "vocals": 0.0},
            "reasoning_fine": {"genre and style": 0.0, "harmony": 0.0, "metre and rhythm": 0.0, "tempo": 0.5},
            "genre": {"Classical": 0.0, "Folk, World, & Country": 0.5, "Pop": 0.0, "Reggae": 0.0, "Rock": 0.5}}


def test_muchomusic_knowledge_reasoning_and_genre_equal_the_released_scorer() -> None:
    rows = []
    for i, (opts, order, know, reason, genre, out) in enumerate(MUCHO):
        parsed = parse_muchomusic(out, opts)
        assert parsed == RELEASED["responses"][i]
        meta = json.dumps({"music_knowledge": know, "music_reasoning": reason, "genre": [genre]})
        rows.append({"request_id": f"r{i}", "item_id": f"q{i}", "protocol": "muchomusic", "protocol_kind": "mcq",
                     "dataset": "mcm", "task": "muchomusic", "model": "m", "variant": "muchomusic",
                     "condition": "correct", "option_order": 0, "options": opts, "correct_index": order.index(0),
                     "parsed_index": parsed, "metadata": meta, "error": None})
    s = summary_table(per_item_table(rows), resamples=100, confidence=0.95, seed=0).to_pandas()
    acc = {g: v for g, v in zip(s[s.metric == "accuracy"]["group"], s[s.metric == "accuracy"]["value"])}
    assert acc["all"] == pytest.approx(RELEASED["accuracy"])
    assert acc["dimension=knowledge"] == pytest.approx(RELEASED["knowledge"])
    assert acc["dimension=reasoning"] == pytest.approx(RELEASED["reasoning"])
    for dim, want in RELEASED["knowledge_fine"].items():
        assert acc[f"dimension=knowledge/{dim}"] == pytest.approx(want), dim
    for dim, want in RELEASED["reasoning_fine"].items():
        assert acc[f"dimension=reasoning/{dim}"] == pytest.approx(want), dim
    for genre, want in RELEASED["genre"].items():  # "Folk, World, & Country" is one genre
        assert acc[f"genre={genre}"] == pytest.approx(want), genre
    assert set(s["protocol_kind"]) == {"mcq"} and set(s["protocol"]) == {"muchomusic"}


# ----------------------------------------------------------------------- explicit denominators


def _mcq_row(i: int, order: int, parsed: int, cond: str = "correct", error: str | None = None) -> dict:
    return {"request_id": f"{cond}-{i}-{order}", "item_id": f"q{i}", "protocol": "hummusqa", "protocol_kind": "mcq",
            "dataset": "hum", "task": "hummusqa", "model": "m", "variant": "v", "condition": cond,
            "option_order": order, "options": ["a", "b", "c", "d"], "correct_index": 0, "parsed_index": parsed,
            "error": error, "error_stage": "model" if error else None}


def test_mcq_accuracy_leaves_errors_out_and_says_so() -> None:
    # q0: right, right; q1: right, errored; q2: wrong, unanswered; q3: errored, errored (no scored request)
    rows = [_mcq_row(0, 0, 0), _mcq_row(0, 1, 0), _mcq_row(1, 0, 0), _mcq_row(1, 1, 0, error="model: boom"),
            _mcq_row(2, 0, 2), _mcq_row(2, 1, -1), _mcq_row(3, 0, 0, error="model: boom"),
            _mcq_row(3, 1, 0, error="model: boom")]
    merged = merge_chunks(rows)
    errors = [r for r in merged if r["error"]]
    s = summary_table(per_item_table(merged), resamples=100, confidence=0.95, seed=0, errors=errors).to_pandas()
    v = _values(s, condition="correct", group="all")
    assert v["errored"] == 3
    assert v["accuracy"] == pytest.approx((1 + 1 + 0) / 3)  # over answered + unanswered, q3 absent
    assert v["accuracy_with_errors"] == pytest.approx((1 + 0.5 + 0 + 0) / 4)  # errors count as wrong
    assert "errored requests left out" in s[s.metric == "accuracy"]["definition"].iloc[0]
    # a cell whose every request errored is still listed
    only_errors = [_mcq_row(0, 0, 0, cond="noise", error="decode: missing")]
    s2 = summary_table(per_item_table(merged), resamples=100, confidence=0.95, seed=0,
                       errors=errors + only_errors).to_pandas()
    assert _values(s2, condition="noise", group="all") == {"errored": 1.0, "accuracy_with_errors": 0.0}


def test_factual_f1_lists_errored_rows() -> None:
    def row(i, extracted, labels, error=None):
        return {"request_id": f"r{i}", "item_id": f"i{i}", "protocol": "factual", "dataset": "mn",
                "task": "instrument", "model": "m", "variant": "v", "condition": "correct", "option_order": 0,
                "extracted": extracted, "labels": labels, "error": error, "error_stage": "judge" if error else None}
    merged = merge_chunks([row(0, ["piano"], ["piano", "violin"]), row(1, ["cello"], ["cello"]),
                           row(2, None, ["flute", "oboe"], error="judge: timeout")])
    s = summary_table(per_item_table(merged), resamples=100, confidence=0.95, seed=0,
                      errors=[r for r in merged if r["error"]]).to_pandas()
    v = _values(s, condition="correct", group="all")
    assert v["errored"] == 1
    assert v["f1_micro"] == pytest.approx(2 * 2 / (2 * 2 + 0 + 1))  # TP 2, FN 1
    assert v["recall_micro_with_errors"] == pytest.approx(2 / 5)  # + the errored row's 2 true labels missed
    assert v["f1_micro_with_errors"] == pytest.approx(2 * 2 / (2 * 2 + 0 + 3))


# ----------------------------------------------------------------------- HumMusQA's figure rule


def test_categories_at_most_five_percent_are_left_out_of_the_breakdown() -> None:
    # 40 questions: Harmony 30, Melody 8 (20 %), Lyrics 2 (5 %) → with 0.05, Lyrics is left out and named
    cats = ["Harmony"] * 30 + ["Melody"] * 8 + ["Lyrics"] * 2
    rows = [{**_mcq_row(i, 0, i % 2), "category": c} for i, c in enumerate(cats)]
    s = summary_table(per_item_table(rows), resamples=100, confidence=0.95, seed=0).to_pandas()
    every = "\n".join(breakdown_sections(s))
    assert "| m | v | Lyrics | 2 |" in every
    text = "\n".join(breakdown_sections(s, protocols={"hummusqa": {"breakdown_min_share": 0.05}}))
    assert "| m | v | Harmony | 30 |" in text and "| m | v | Melody | 8 |" in text
    assert "| m | v | Lyrics |" not in text and "Left out (each at most 5 % of the questions): Lyrics." in text


def test_table3_extraction_example() -> None:
    """Table 3: "This piece of music falls under the genre of pop/soft rock." for ground truth Pop. Both labels are
    extracted; with one true label and two predicted, precision is 1/2 and recall 1 (the caption's "Precision = 1,
    Recall = 0.5" swaps them); F1 0.667 either way."""
    from evalcore.vocab import GENRE_LEXICON, extract
    from evalcore.scorers.factual import set_scores

    labels = extract("This piece of music falls under the genre of pop/soft rock.", GENRE_LEXICON)
    assert labels == ["pop", "rock"]
    s = set_scores(labels, ["pop"])
    assert (s["precision"], s["recall"]) == (0.5, 1.0) and s["f1"] == pytest.approx(0.667, abs=5e-4)
