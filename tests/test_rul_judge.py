"""RUListening's answer extraction (judge ``mcq_rul``) on hand-labelled outputs, and its prompt template.

The labels below were assigned by reading the released rule, ``extract_answer`` in
``ExampleAudioEval/qwen_2_audio.py`` of github.com/yongyizang/AreYouReallyListening at
d3971de18934a283deb41f472d21b34eb19e10c2 (the same function is printed on the dataset card
huggingface.co/datasets/yongyizang/RUListening). Its steps, as the source writes them:

* ``re.findall(r"\\[\\[([A-E])\\]\\]", response)`` — "Return the last match";
* else ``(?:answer is|chose|choose|select|guess is|I choose|I select|I guess) ([A-E])\\b`` with
  ``re.IGNORECASE``, the last match upper-cased;
* else, for letter in A…E: ``f"option {letter}" in response or f"Option {letter}" in response or
  f"({letter})" in response``;
* else an option whose lower-cased text is in the lower-cased response, in letter order;
* else ``""`` (no answer).

Each case says which step decides it and why; ``-1`` is a parse failure (never a guess).
"""

from __future__ import annotations

import pytest

from evalcore.judges.base import JUDGES
from evalcore.judges.mcq_rul import McqRulJudge, parse_rul
from evalcore.protocols.templates import TEMPLATE_SETS

OPTS = ["Fiddle", "Tin whistle", "Accordion", "Banjo"]  # presented order: A B C D

CASES = [
    # step 1: the last [[X]]
    ("The melody is bowed, so it is a fiddle. [[A]]", 0),
    ("[[B]] at first, but listening again [[C]]", 2),
    ("I select B, and my final guess is [[D]]", 3),           # step 1 wins over a cue earlier in the text
    ("[[E]]", 4),                                             # E exists for the rule: index 4, past four options
    # step 2: a cue phrase, then a space and a lone letter; case ignored, the letter's included
    ("The answer is C.", 2),
    ("Answer Is d", 3),
    ("I choose a guitar-like timbre, close to a banjo", 0),      # "choose a" names A (quirk kept), before banjo
    ("chose Bartok-like harmonies", -1),                      # "B" followed by a letter: no word boundary, nothing
    ("The correct answer is: B", -1),                         # "answer is:" — the colon breaks the cue; no (B)
    # step 3: option X / Option X / (X), first in letter order, not in order of appearance
    ("My guess is (B)", 1),                                   # step 2 needs the letter right after the space
    ("Option D seems unlikely; it is (B).", 1),               # B is checked before D
    ("(C) is wrong and (A) is right", 0),
    ("I'd go with option Alpha", 0),                          # "option A" is a substring (quirk kept)
    # step 4: an option's text in the response, first in presented order
    ("It is played on an accordion.", 2),
    ("Not a fiddle; I hear a banjo.", 0),                     # negation is not read: fiddle comes first
    # nothing: a parse failure
    ("I'm not sure what instrument this is.", -1),
    ("[[b]]", -1),                                            # step 1 is case-sensitive; "b" alone matches nothing
    ("", -1),
]


@pytest.mark.parametrize("text,expected", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_hand_labelled_outputs(text: str, expected: int) -> None:
    assert parse_rul(text, OPTS) == expected


def test_empty_option_never_matches_and_letters_do_not_depend_on_option_count() -> None:
    assert parse_rul("something else", ["", "x y z"]) == -1   # the released loop skips an empty option text
    assert parse_rul("[[C]]", ["a", "b"]) == 2                  # index past two options: answered, wrong


def test_judge_is_registered_and_counts_failures() -> None:
    judge = JUDGES.get("mcq_rul")()
    assert isinstance(judge, McqRulJudge)
    out = judge.judge(["[[B]]", "no idea", None, "[[A]]"], [OPTS, OPTS, OPTS, None])
    assert out[0] == {"parsed_index": 1, "credited": [1]}     # the released verdict: the option extracted
    assert out[1] == {"parsed_index": -1, "credited": []}     # a parse failure, no random letter
    assert out[2]["parsed_index"] is None and out[2]["error"] == "no response"
    assert out[3]["parsed_index"] is None and out[3]["error"] == "no options"


def test_template_renders_the_released_leave_one_out_prompt() -> None:
    # the f-string of format_leave_one_out_prompt in ExampleAudioEval/qwen_2_audio.py, options joined by " "
    released = ("Provide your best guess of this question. Think step by step.\n\nQuestion: Which instrument?\n\n"
                "Options: (A) Fiddle (B) Tin whistle (C) Accordion (D) Banjo\n\n"
                "Write out your guess in the format of [[Letter]], such as [[A]], [[B]], [[C]], [[D]].")
    assert TEMPLATE_SETS["rul-muchomusic"].render("Which instrument?", OPTS) == released


def test_published_and_strict_verdicts_agree_on_every_case() -> None:
    """evalcore reads the extraction with no departure: the default (released) verdict and the strict one are the
    same on every hand-labelled case and every answer (the letter E past four options: wrong by both)."""
    from evalcore.scorers.mcq import MCQScorer

    judged = McqRulJudge().judge([t for t, _ in CASES], [OPTS] * len(CASES))
    rows = [{**j, "correct_index": a} for j in judged for a in range(len(OPTS))]
    scored = MCQScorer().score(rows)
    assert [s["correct"] for s in scored] == [s["correct_strict"] for s in scored]
    assert [s["correct"] for s in scored] == [float(j["parsed_index"] == a) for j in judged for a in range(len(OPTS))]
