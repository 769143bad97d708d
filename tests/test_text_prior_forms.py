"""The weight-free text prior answers in the form each benchmark's rule reads (finding 7): where the prompt asks for
the choice's text (the MMAU, MMAR and MMAU-Pro configs) it answers the first option's text, which the published
word-set rule credits; elsewhere its letter, which the letter rules read. Its row then measures what the questions
leak, not a constant 0. The prompts are rendered from the configs' own variants and templates."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from evalcore.judges.mcq_muchomusic import parse_muchomusic
from evalcore.judges.mcq_string import parse_choice
from evalcore.judges.mmau import parse_mmau
from evalcore.models.text_prior import MCQ_ANSWER, TextPrior
from evalcore.kinds.base import KINDS
from evalcore.protocols.prompts import render
from evalcore.protocols.templates import template_set

REPO = pathlib.Path(__file__).resolve().parents[1]
OPTIONS = ["A slow ballad on piano", "Fast drums and bass", "A string quartet", "Electric guitar solo"]


def _variant(config: str) -> str:
    cfg = yaml.safe_load((REPO / "configs" / "benchmarks" / f"{config}.yaml").read_text())
    (proto,) = cfg["protocols"]
    (template,) = proto["variants"].values()
    return template


@pytest.mark.parametrize("config", ["mmau-music", "mmar-music", "mmau-pro-music"])
def test_on_word_set_benchmarks_the_prior_answers_an_options_text(config: str) -> None:
    prompt = render(_variant(config), "Which instrument leads?", OPTIONS)
    said = TextPrior().answer(prompt)
    assert said == OPTIONS[0]
    assert parse_mmau(said, OPTIONS) == 0  # the published rule credits it (a letter matched nothing: a constant 0)
    assert parse_mmau(MCQ_ANSWER, OPTIONS) == -1


def test_where_a_letter_is_read_the_prior_answers_a_letter() -> None:
    plain = render(KINDS.get("mcq").variants["default"], "Which instrument leads?", OPTIONS)  # the demo's prompt
    assert TextPrior().answer(plain) == MCQ_ANSWER and parse_choice(MCQ_ANSWER, OPTIONS) == 0
    released = render(template_set("muchomusic"), "Which instrument leads?", OPTIONS)
    assert TextPrior().answer(released) == MCQ_ANSWER and parse_muchomusic(MCQ_ANSWER, OPTIONS) == 0


def test_the_form_can_be_fixed() -> None:
    plain = render(KINDS.get("mcq").variants["default"], "Which instrument leads?", OPTIONS)
    assert TextPrior(mcq_answer="text").answer(plain, "text") == OPTIONS[0]
    asks = render(_variant("mmau-music"), "Which instrument leads?", OPTIONS)
    assert TextPrior().answer(asks, "letter") == MCQ_ANSWER
    assert TextPrior(mcq_answer="text").info()["mcq_answer"] == "text"
