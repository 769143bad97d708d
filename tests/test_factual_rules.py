"""The paper's eight keyword-extraction rules (App. B.1), one test each, for the deterministic
lexicon extractor and — where a rule concerns the LLM's output — the LLM extractor's validation."""

from __future__ import annotations

import pytest

from evalcore.judges.llm_judges import validate_labels
from evalcore.vocab import (FMA_GENRES, LEXICONS, MUSICNET_COMPOSERS, MUSICNET_INSTRUMENTS, extract, lexicon_name,
                            normalize)


def _x(task: str, text: str) -> list[str]:
    return extract(text, LEXICONS[lexicon_name(task)])


def test_rule_1_exact_mention_only():
    assert _x("genre", "The genre of the song is rock.") == ["rock"]
    assert _x("instrument", "Instruments: double bass and horns.") == ["bass", "horn"]
    # a string quartet implies violins, but none is named
    assert _x("instrument", "This is a string quartet.") == []
    assert _x("composer", "A German Baroque composer wrote this.") == []


def test_rule_2_no_guessing():
    assert _x("genre", "A swing rhythm with a walking bass line and brushed snare.") == []
    assert _x("genre", "It has a techno beat, like a rave.") == []  # a sub-genre is not its top level
    assert _x("composer", "The Brandenburg-style counterpoint is typical of the Baroque.") == []
    assert _x("instrument", "Bowed strings and a keyboard.") == []  # families, not instruments


@pytest.mark.parametrize("task,text,expected", [
    ("genre", "It sounds more like jazz than blues.", ["jazz"]),
    ("genre", "This is blues rather than rock.", ["blues"]),
    ("instrument", "A clarinet instead of an oboe.", ["clarinet"]),
    ("composer", "Closer to Mozart than to Haydn.", ["mozart"]),
    ("instrument", "The cello is louder than the piano.", ["cello", "piano"]),  # no preference stated: both
])
def test_rule_3_comparatives_keep_the_preferred(task, text, expected):
    assert _x(task, text) == expected


def test_rule_4_dedupe_in_order_of_first_appearance():
    assert _x("instrument", "Violin, piano, violins again, a cello and more piano.") == ["violin", "piano", "cello"]
    assert _x("genre", "Pop, then rock, then pop music again.") == ["pop", "rock"]
    assert validate_labels("Rock, jazz, rock, classical", FMA_GENRES) == (["rock", "jazz", "classical"], 0)


def test_rule_5_comma_separated_output():
    assert validate_labels("rock, jazz, classical", FMA_GENRES) == (["rock", "jazz", "classical"], 0)
    assert validate_labels("- piano\n- violin", MUSICNET_INSTRUMENTS) == (["piano", "violin"], 0)
    # the lexicon's list round-trips through the same output format
    labels = _x("instrument", "A piano trio: piano, violin and cello.")
    assert validate_labels(", ".join(labels), MUSICNET_INSTRUMENTS) == (labels, 0)


def test_rule_6_empty_when_nothing_is_mentioned():
    assert _x("instrument", "") == [] and _x("instrument", "I'm not sure which instruments are used.") == []
    assert _x("genre", "No genre is mentioned here.") == []
    for empty in ("", "none", "None.", '""'):
        assert validate_labels(empty, FMA_GENRES) == ([], 0)


def test_rule_7_canonical_forms():
    assert _x("composer", "It resembles J.S. Bach and Antonín Dvořák.") == ["bach", "dvorak"]
    assert _x("instrument", "An acoustic grand piano, a contrabass and two French horns.") == ["piano", "bass", "horn"]
    assert _x("genre", "Hip hop with R&B.") == ["hip-hop", "soul-rnb"]
    assert normalize("Acoustic Grand Piano", "instrument") == "piano"
    assert normalize("J.S. Bach", "composer") == "bach"
    # the LLM's output is matched case-insensitively to canonical labels; anything else is dropped and counted
    assert validate_labels("Bach, MOZART, Vivaldi, Telemann", MUSICNET_COMPOSERS) == (["bach", "mozart"], 2)


def test_rule_8_no_stylistic_inclusion():
    assert _x("genre", "It has a jazz-like feeling but is mostly classical.") == ["classical"]
    assert _x("genre", "Bluesy and jazzy, with a folk-esque melody.") == []
    assert _x("instrument", "A piano-like timbre, perhaps a synth.") == []
