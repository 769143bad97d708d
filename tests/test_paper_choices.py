"""The choices the three papers do not fix, each as evalcore makes it today (docs/reproduce.md, "Choices the paper
does not fix", one section per paper; every choice there names the test that pins it, checked below).

Unit-level: the functions that make each choice, on hand examples, and the paper configs that set them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from evalcore.runconfig.config import parse_config
from evalcore.judges.llm_judges import McqLLMJudge
from evalcore.llm.prompts import MCQ_MATCH
from evalcore.protocols.templates import template_set
from evalcore.reports.published import read
from evalcore.scorers.factual_modes import aggregate_answers
from evalcore.scorers.freeform import FreeformScorer
from evalcore.scorers.mcq_orders import question_stats, summarize_orders
from evalcore.scoring.requests import merge_chunks
from paper_text import flat, paper

REPO = Path(__file__).resolve().parents[1]
PAPER_CONFIGS = sorted((REPO / "configs" / "paper").glob("*.yaml"))
REFERENCE = "A calm piano piece with soft strings in a minor key."


def _config(stem: str) -> dict:
    return yaml.safe_load((REPO / "configs" / "paper" / f"{stem}.yaml").read_text())


# ----------------------------------------------------------------------------------------------- factual paper

def _chunked(texts: list[str]) -> dict:
    """One free-form request of a chunked model, merged from its chunk rows as the scoring stage does."""
    rows = [{"request_id": "r", "chunk_index": i, "n_chunks": len(texts), "text": t, "reference": REFERENCE,
             "dataset": "d", "model": "m", "condition": "correct", "variant": "default", "error": None}
            for i, t in enumerate(texts)]
    (row,) = merge_chunks(rows)
    return row


def _scorer(chunks: str) -> FreeformScorer:
    return FreeformScorer({"names": ["bleu", "rouge"], "chunks": chunks})


def test_chunked_freeform_answers_are_joined_by_a_newline() -> None:
    texts = ["A calm piano piece.", "Soft strings in a minor key, then silence."]
    row = _chunked(texts)
    assert row["text"] == "\n".join(texts) and row["chunk_texts"] == texts
    joined = _scorer("join").score([row])[0]
    whole = _scorer("join").score([{**row, "chunk_texts": None}])[0]  # the joined text as one answer
    assert joined == whole and joined["error"] is None
    assert _scorer("join").cfg.chunks == "join"  # the default: configs/paper/ set nothing


def test_chunks_mean_scores_each_chunk_and_averages() -> None:
    texts = ["A calm piano piece.", "Soft strings in a minor key, then silence."]
    row = _chunked(texts)
    mean = _scorer("mean").score([row, _chunked(["A calm piano piece in a minor key."])])
    each = [_scorer("mean").score([{**row, "text": t, "chunk_texts": None}])[0] for t in texts]
    for metric in ("bleu", "rouge"):
        assert mean[0][metric] == pytest.approx((each[0][metric] + each[1][metric]) / 2)
        assert not math.isclose(mean[0][metric], _scorer("join").score([row])[0][metric])
    single = _scorer("join").score([_chunked(["A calm piano piece in a minor key."])])[0]
    assert mean[1] == single  # an answer of one chunk is scored the same either way
    assert "a chunked answer: the mean over its chunks" in _scorer("mean").aggregates[0].definition
    assert "chunk" not in _scorer("join").aggregates[0].definition
    cfg = _config("factual-table02-freeform")
    cfg["protocols"][0]["metrics"] = {**cfg["protocols"][0]["metrics"], "chunks": "mean"}
    assert parse_config(cfg).protocols[0].metrics.chunks == "mean"  # the switch, in the config


def test_true_false_majority_tie_is_no_and_unanswered_chunks_are_dropped() -> None:
    assert aggregate_answers([True, False], "majority") is False  # a tie: no
    assert aggregate_answers([True, None], "majority") is True  # the unanswered chunk is not counted
    assert aggregate_answers([None, None], "majority") is None  # no chunk answered: unanswered
    assert aggregate_answers([False, True, None], "any") is True


def test_true_false_accuracy_is_the_jaccard_index_though_the_sentence_names_true_negatives() -> None:
    sentence = "we computed accuracy, which accounts for both true positives and true negatives"
    assert sentence in flat(paper())
    cells = {(c.table, c.model, c.condition, c.metric): c.value for c in read() if c.table in ("table8", "table9")}
    gaps, beyond = [], 0
    for (table, model, condition, metric), printed in cells.items():
        if metric.startswith("jaccard_"):
            rule = metric.removeprefix("jaccard_")
            p, r = (float(cells[(table, model, condition, f"{m}_{rule}")]) for m in ("precision", "recall"))
            implied = [(2 * a * b / (a + b)) / (2 - 2 * a * b / (a + b)) for a in (p - 5e-4, p + 5e-4)
                       for b in (r - 5e-4, r + 5e-4)]  # F1 / (2 − F1) over the rounding of P and R
            gaps.append(abs((2 * p * r / (p + r)) / (2 - 2 * p * r / (p + r)) - float(printed)))
            beyond += not min(implied) - 5e-4 <= float(printed) <= max(implied) + 5e-4
    assert len(gaps) == 12 and max(gaps) < 0.0066 + 5e-5 and beyond == 7


def test_ltu_as_is_chunked_where_the_paper_names_only_two_chunked_models() -> None:
    # "60-second segments" for MU-LLaMA and LLaMA-Adapter; LTU-AS chunked by inference (tests/test_ltu_as_chunking.py)
    chunked = {p.stem for p in PAPER_CONFIGS if any(m["name"] == "ltu-as" and m.get("chunk_seconds") == 60
                                                    for m in yaml.safe_load(p.read_text())["models"])}
    assert chunked == {"factual-table04-main", "factual-table05-instrument-prompts", "factual-table08-09-true-false",
                       "factual-table12-composer-prompts", "factual-table13-binary-composer"}
    for stem in ("factual-table02-freeform", "factual-table10-11-captioning"):  # free-form: its window's start
        (ltu,) = [m for m in _config(stem)["models"] if m["name"] == "ltu-as"]
        assert ltu["long_audio"] == "truncate"


def test_every_random_choice_of_the_paper_configs_is_seeded_with_0() -> None:
    for path in PAPER_CONFIGS:
        assert yaml.safe_load(path.read_text())["seeds"] == {"derangement": 0, "noise": 0, "options": 0, "icl": 0,
                                                              "bootstrap": 0}, path.stem


# ----------------------------------------------------------------------------------------------- HumMusQA

def test_hummusqa_matcher_prompt_is_evalcores_own() -> None:
    for stem in ("hummusqa-table01", "hummusqa-table02-fake-audio"):
        for protocol in _config(stem)["protocols"]:
            assert protocol["judge"]["kind"] == "mcq_llm" and "output" not in protocol["judge"]["params"]
    assert McqLLMJudge.template is MCQ_MATCH
    text = flat(paper("hummusqa-benchmark.txt"))
    # the paper says what the matcher does, not how it was asked
    assert "parsed by an LLM (gemini-2.5-flash) prompted to match the response with the given options" in text
    first = MCQ_MATCH.system.split(". ")[0]
    assert first.startswith("You decide which option") and first not in text


def test_hummusqa_answer_str_is_one_option_a_line_as_letter_colon_text() -> None:
    assert r'prompt = f"{question}\n{answer_str}"' in paper("hummusqa-benchmark.txt")  # printed, never defined
    prompt = template_set("hummusqa-plain").render("Which key?", ["C major", "A minor", "G major", "E minor"])
    assert prompt == "Which key?\nA: C major\nB: A minor\nC: G major\nD: E minor"


def _orders(parsed: list[int], correct: list[bool]) -> pd.DataFrame:
    """One question asked in len(parsed) option orders (the options rotate), answered ``parsed``."""
    opts = ["w", "x", "y", "z"]
    return pd.DataFrame({"question_id": ["q"] * len(parsed), "order_id": list(range(len(parsed))),
                         "parsed_index": parsed, "correct": correct,
                         "options": [opts[i:] + opts[:i] for i in range(len(parsed))]})


def test_hummusqa_a_question_unanswered_in_one_order_is_inconsistent() -> None:
    # "the percentage of questions where the model produced identical answers across all four runs": whether no
    # answer is an answer, the sentence does not say
    assert "produced identical answers across all four runs" in flat(paper("hummusqa-benchmark.txt"))
    # the same option (w) in orders 0 and 1, then nothing in order 2: not consistent
    assert question_stats(_orders([0, 3, -1], [True, True, False]))["consistent"].iloc[0] == 0.0
    assert question_stats(_orders([0, 3], [True, True]))["consistent"].iloc[0] == 1.0


def test_hummusqa_sd_is_the_sample_sd_over_orders() -> None:
    df = pd.concat([_orders([0, 1], [True, False]).assign(question_id=q) for q in ("q1", "q2")])
    out = summarize_orders(df, resamples=100).set_index("metric")
    assert out.loc["accuracy_sd", "value"] == pytest.approx(math.sqrt(0.5))  # per-order 1 and 0, ddof = 1
    assert "ddof=1" in out.loc["accuracy_sd", "definition"]


# ----------------------------------------------------------------------------------------------- the page

def test_each_choice_on_the_page_names_the_test_that_pins_it() -> None:
    page = (REPO / "docs" / "reproduce.md").read_text(encoding="utf-8")
    sections = re.findall(r"^#### Choices the paper does not fix\n(.*?)(?=^#)", page, re.DOTALL | re.MULTILINE)
    assert len(sections) == 3
    for text in sections:
        bullets = re.findall(r"^\* (.*?)(?=^\* |\Z)", text, re.DOTALL | re.MULTILINE)
        assert bullets
        for bullet in bullets:
            refs = re.findall(r"`tests/(test_\w+\.py)::(test_\w+)`", bullet)
            assert refs, bullet[:80]
            for file, name in refs:
                assert re.search(rf"^def {name}\(", (REPO / "tests" / file).read_text(), re.MULTILINE), (file, name)
