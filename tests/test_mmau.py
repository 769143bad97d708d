"""MMAU: the loader reads the released JSON unrenamed (tests/fixtures/mmau, the released fields and layout), and
the ``mcq_mmau`` judge follows the published ``string_match`` of github.com/Sakshi113/MMAU ``evaluation.py``.

Each judge case is hand-labelled twice: the option evalcore's strict reading names (-1 = unanswered) and whether
the published scorer counts the response right for the case's answer. The second column is checked against
:func:`published_verdict`, a transcription of the published function's steps (answer-centred, as released), so
the labels are the published rule's, not a restatement of evalcore's judge; the judge's default verdict (the
options it ``credited``) must equal it on every case.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from evalcore.datasets.base import DatasetContext
from evalcore.datasets.mmau import MMAU
from evalcore.datasets.validate import validate_items
from evalcore.judges.mmau import McqMmauJudge, parse_mmau

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "mmau"


def published_verdict(answer: str, prediction: str, choices: list[str]) -> bool:
    """The published ``string_match(answer, prediction, choices)``, step by step as released: word sets by
    ``\\b\\w+\\b`` on lowercased text; False for a prediction without words; the words of every choice whose
    word set differs from the answer's, less the answer's words, are forbidden; right = all the answer's words
    present and no forbidden word present."""
    def tokens(s: str) -> set[str]:
        return set(re.findall(r"\b\w+\b", s.lower()))
    pred, ans = tokens(prediction), tokens(answer)
    if not pred:
        return False
    forbidden: set[str] = set()
    for c in choices:
        if tokens(c) != ans:
            forbidden.update(tokens(c) - ans)
    return ans.issubset(pred) and pred.isdisjoint(forbidden)


VOICE = ["Male speech", "Female speech", "Male singing", "Female singing"]
KEYS = ["A major", "A minor", "C major", "C minor"]
SECONDS = ["1.63 seconds", "2.74 seconds", "1.53 seconds", "3.10 seconds"]
BIRD = ["Male speech", "Bird", "Wind", "Both bird sound and male speech"]
MOTION = ["From far to near", "From near to far", "Remains unchanged", "Circling around"]

# (response, choices, answer, evalcore's parsed index, the published verdict for that answer)
CASES = [
    ("Male singing", VOICE, "Male singing", 2, True),
    ("(C) Male singing", VOICE, "Male singing", 2, True),  # the letter is one more word, harmless here
    ("C", VOICE, "Male singing", -1, False),  # letters do not count
    ("(C)", VOICE, "Male singing", -1, False),
    ("The answer is male singing.", VOICE, "Male singing", 2, True),
    ("singing male", VOICE, "Male singing", 2, True),  # order and case do not count
    ("MALE-SINGING!", VOICE, "Male singing", 2, True),
    ("singing", VOICE, "Male singing", -1, False),  # a shared word alone names nothing
    ("Male singing, not female singing", VOICE, "Male singing", -1, False),  # "female" is another choice's word
    ("Male speech or male singing", VOICE, "Male speech", -1, False),  # a hedge over two options
    ("Female speech", VOICE, "Male singing", 1, False),  # answered, wrong
    ("", VOICE, "Male singing", -1, False),
    ("...", VOICE, "Male singing", -1, False),  # no word at all
    ("A minor", KEYS, "A minor", 1, True),
    ("The answer is (C) A minor", KEYS, "A minor", -1, False),  # the label "C" is a word of "C major"/"C minor"
    ("(B) A minor", KEYS, "A minor", 1, True),
    ("2.74 seconds", SECONDS, "2.74 seconds", 1, True),
    ("2.74", SECONDS, "2.74 seconds", -1, False),  # "seconds" missing: the answer's words are not all there
    ("1.63 or 1.53 seconds", SECONDS, "1.63 seconds", -1, False),
    ("Bird", BIRD, "Bird", 1, True),  # "bird" is also a word of option D, but D's other words are absent
    ("Both bird sound and male speech", BIRD, "Both bird sound and male speech", 3, True),
    ("Bird", BIRD, "Both bird sound and male speech", 1, False),
    # two options with one word set: the published scorer credits the response whichever of the two is the
    # answer; a judge names one option, so evalcore counts it unanswered (its documented departure)
    ("From near to far", MOTION, "From far to near", -1, True),
    ("From near to far", MOTION, "From near to far", -1, True),
    ("Circling around", MOTION, "Circling around", 3, True),
]
IDS = [f"{i}:{c[0][:30]}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize(("response", "choices", "answer", "index", "verdict"), CASES, ids=IDS)
def test_judge_follows_the_published_rule(response, choices, answer, index, verdict) -> None:
    """The default verdict (the options ``credited``) is the published function's on every case; the strict
    reading (``parsed_index``) is the one option named, as before the published verdict was added."""
    assert published_verdict(answer, response, choices) is verdict
    (got,) = McqMmauJudge().judge([response], [choices])
    assert got["parsed_index"] == parse_mmau(response, choices) == index
    assert (choices.index(answer) in got["credited"]) is verdict
    assert (index == choices.index(answer)) is (verdict and index != -1)  # strict credits only what it names


def test_judge_rows_and_errors() -> None:
    out = McqMmauJudge().judge(["Male singing", "C", None, "x"], [VOICE, VOICE, VOICE, None])
    assert [r["parsed_index"] for r in out] == [2, -1, None, None]
    assert [r.get("credited") for r in out[:2]] == [[2], []]
    assert out[2]["error"] == "no response" and out[3]["error"] == "no options"


def test_an_option_without_words_is_credited_by_the_published_rule_only() -> None:
    # a choice without words ("♯") matches any response with a word and no other choice's word: the published
    # scorer credits it; the strict reading never names it (MMAR's "" choices are left out by its loader)
    choices = ["C major", "G major", "\u266f"]
    assert published_verdict("\u266f", "I do not know", choices)
    (got,) = McqMmauJudge().judge(["I do not know"], [choices])
    assert got == {"parsed_index": -1, "credited": [2]}
    assert parse_mmau("I do not know", ["Word guessing game", "Number guessing game", ""]) == -1
    assert not published_verdict("Word guessing game", "I do not know",
                                 ["Word guessing game", "Number guessing game", ""])


# --------------------------------------------------------------------------- loader


def _items(tmp_path, **params):
    ds = MMAU(**params)
    return validate_items("mmau", ds.items(DatasetContext("mmau", str(tmp_path), 0)))


def test_loader_reads_test_mini_music_subset(tmp_path) -> None:
    released = json.loads((FIXTURES / "mmau-test-mini.json").read_text())
    assert {"id", "audio_id", "question", "choices", "answer", "dataset", "task", "category", "sub-category",
            "difficulty", "split"} == set(released[0])  # the released fields, unrenamed
    good, bad = _items(tmp_path, path=str(FIXTURES / "mmau-test-mini.json"))
    music = [r for r in released if r["task"] == "music"]
    assert len(good) + len(bad) == len(music)  # the subset by the file's task field; every music row accounted for
    assert [g["item_id"] for g in good] == [r["id"] for r in music if len(set(r["choices"])) == 4]
    assert len(bad) == 1 and "options must be distinct" in bad[0]["error"]  # a released item repeats a choice
    first = good[0]
    assert first["options"] == music[0]["choices"] and first["correct_option"] == 0
    assert first["audio_uri"] == str(FIXTURES / "test-mini-audios" / f"{music[0]['id']}.wav")
    assert pathlib.Path(first["audio_uri"]).is_file()
    assert (first["task"], first["category"], first["difficulty"]) == ("music", "Information Extraction", "easy")
    assert json.loads(first["metadata"])["secondary_categories"] == ["Instrumentation"]
    assert good[1]["correct_option"] == 1  # "Melancholic", by its text among the choices


def test_loader_tasks_param_selects_by_the_task_field(tmp_path) -> None:
    good, _ = _items(tmp_path, path=str(FIXTURES / "mmau-test-mini.json"), tasks=["sound"])
    assert [g["task"] for g in good] == ["sound"]


def test_test_split_withheld_answers_are_error_rows(tmp_path) -> None:
    good, bad = _items(tmp_path, path=str(FIXTURES / "mmau-test.json"))
    assert good == [] and len(bad) == 2
    assert all("no answer" in b["error"] and "withholds" in b["error"] for b in bad)
