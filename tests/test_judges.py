"""Tests of the deterministic judges: lexicon label extraction and the strict MCQ parser."""

from __future__ import annotations

import pytest
from evalcore.judges.base import JUDGES
from evalcore.judges.mcq_string import parse_choice
from evalcore.vocab import INSTRUMENT_LEXICON, Lexicon, extract

# --------------------------------------------------------------------------- extractor

EXTRACT_CASES = [
    # plain lists, canonical forms, order of first appearance
    ("The piece features a double bass and horns.", ["bass", "horn"]),
    ("Instruments: double bass and horns", ["bass", "horn"]),
    ("I hear a bass guitar, drums and an electric guitar.", ["bass", "drums", "guitar"]),
    ("Piano, violin, viola and cello: a classic piano quartet.", ["piano", "violin", "viola", "cello"]),
    ("Guitar, guitar, and more guitar! Also some Piano.", ["guitar", "piano"]),
    ("The oboe and bassoon answer the clarinet.", ["oboe", "bassoon", "clarinet"]),
    # synonyms, players, plurals
    ("A contrabass and an upright bass hold the low end.", ["bass"]),
    ("The drummer plays a steady beat while the pianist improvises.", ["drums", "piano"]),
    ("Two flutes, three trumpets and four French horns.", ["flute", "trumpet", "horn"]),
    ("The singer is backed by a Hammond organ and an organ pad.", ["vocals", "organ"]),
    ("A fiddle tune over acoustic guitars and a drum kit.", ["violin", "guitar", "drums"]),
    ("Layers of synths and a sax solo.", ["synthesizer", "saxophone"]),
    ("Plucked strings accompany a harpsichord.", ["guitar", "harpsichord"]),
    ("Male vocals with backing vocals and a choir.", ["vocals"]),
    ("Violoncello and celli in unison.", ["cello"]),
    # longest match wins
    ("A bass clarinet and a bass drum.", ["clarinet", "drums"]),
    ("This is a drum and bass track with a synth.", ["synthesizer"]),
    ("It's an english horn solo with French horns behind.", ["horn"]),
    ("The hi-hat and snare drive the groove, with a bass-guitar riff.", ["drums", "bass"]),
    # negation
    ("There is no guitar in this track, only piano.", ["piano"]),
    ("No drums, guitars or bass; just a solo violin.", ["violin"]),
    ("Neither piano nor drums are present. The melody is on the flute.", ["flute"]),
    ("It's not a flute, it's a clarinet.", ["clarinet"]),
    ("There isn't any bass here.", []),
    ("I can't hear any instruments.", []),
    ("The track is played without drums, featuring an organ.", ["organ"]),
    ("The drums are absent, but the guitars carry the song.", ["guitar"]),
    ("The vocals are not present; a trumpet leads.", ["trumpet"]),
    ("I don't think there is a guitar.", []),
    ("The song has piano and no drums.", ["piano"]),
    ("Vocals: none. Instruments: synth bass, drum machine, sax.", ["synthesizer", "drums", "saxophone"]),
    ("It lacks a bassline.", []),
    # comparatives
    ("It sounds more like a viola than a violin.", ["viola"]),
    ("A cello rather than a viola.", ["cello"]),
    ("The guitar more than the piano defines the sound.", ["guitar"]),
    ("A trumpet instead of a saxophone.", ["trumpet"]),
    ("The piano is louder than the drums.", ["piano", "drums"]),
    ("There are more than two guitars.", ["guitar"]),
    # hedging is not negation
    ("I'm not sure, but it could be a cello or maybe a viola.", ["cello", "viola"]),
    ("I can't tell whether it's a violin or a viola.", ["violin", "viola"]),
    ("There is no doubt that the guitar leads.", ["guitar"]),
    ("Not only piano but also violin.", ["piano", "violin"]),
    # nothing / styles / families / word boundaries
    ("", []),
    ("A calm, atmospheric piece with a jazzy feel.", []),
    ("A piano-like timbre over strings.", []),
    ("The track features percussion and brass.", []),
    ("An organic, bassy texture; the basso continuo is implied.", []),
]


@pytest.mark.parametrize("text,expected", EXTRACT_CASES)
def test_extract(text: str, expected: list[str]) -> None:
    assert extract(text, INSTRUMENT_LEXICON) == expected


def test_instrument_lexicon_vocabulary() -> None:
    required = {
        "guitar", "drums", "bass", "organ", "flute", "piano", "violin", "viola", "cello",
        "harpsichord", "horn", "oboe", "bassoon", "clarinet", "trumpet", "saxophone",
        "synthesizer", "vocals",
    }
    assert required <= set(INSTRUMENT_LEXICON.labels)


def test_custom_lexicon_and_plural_rules() -> None:
    genre = Lexicon({"rock": ["rock music"], "jazz": ["bebop"], "melody": []}, name="genre")
    assert extract("Bebop and rock music, lots of melodies.", genre) == ["jazz", "rock", "melody"]
    assert extract("No jazz here.", genre) == []


def test_conflicting_synonyms_rejected() -> None:
    with pytest.raises(ValueError):
        Lexicon({"a": ["x"], "b": ["x"]})


# --------------------------------------------------------------------------- MCQ parser

O4 = ["A soft piano ballad", "An upbeat rock song", "A jazz trio", "A choir"]
KEY = ["major", "minor"]
INSTR = ["piano", "violin", "drums", "flute"]
GENRE = ["rock", "folk rock", "jazz"]

PARSE_CASES = [
    # explicit letter forms
    ("B", O4, 1),
    ("(B)", O4, 1),
    ("B)", O4, 1),
    ("B.", O4, 1),
    ("**B**", O4, 1),
    ("[C]", O4, 2),
    ("a", O4, -1),  # the article alone (an answer cut after its first word) is no option letter
    ("(a)", O4, 0),
    ("Answer: B", O4, 1),
    ("answer: b", O4, 1),
    ("The correct answer is B", O4, 1),
    ("the answer is (B)", O4, 1),
    ("Option B", O4, 1),
    ("Option b is correct", O4, 1),
    ("B) An upbeat rock song", O4, 1),
    ("B An upbeat rock song", O4, 1),
    ("Answer: (D) A choir", O4, 3),
    ("**Answer:** C. A jazz trio", O4, 2),
    ("D - A choir", O4, 3),
    ("I choose C because the drums swing.", O4, 2),
    ("Based on the audio, I would go with D.", O4, 3),
    ("The answer is A because of the soft piano.", O4, 0),
    # verbose, with rejected letters
    ("The answer is (B). (A) is incorrect because the tempo is fast.", O4, 1),
    ("It's not A, it's B.", O4, 1),
    ("Answer: B\n\nOption A is wrong since there are no strings.", O4, 1),
    ("The answer is B, an upbeat rock song, not A.", O4, 1),
    # option text
    ("An upbeat rock song", O4, 1),
    ("The answer is an upbeat rock song.", O4, 1),
    ("This is a soft piano ballad with gentle chords.", O4, 0),
    ("It's in a major key.", KEY, 0),
    ("The song is in a minor key, not a major one", KEY, 1),
    ("It is not major, it is minor.", KEY, 1),
    ("folk rock", GENRE, 1),
    ("I'd say it's rock.", GENRE, 0),
    ("It's B major", ["B major", "E minor"], 0),
    # two letters / hedges / refusals / traps -> unanswered
    ("I think it's (A) or (B)", O4, -1),
    ("It could be B or C.", O4, -1),
    ("Neither A nor B.", O4, -1),
    ("A) A soft piano ballad\nB) An upbeat rock song", O4, -1),
    ("A guitar plays the melody.", INSTR, -1),
    ("I cannot tell whether it is major or minor", KEY, -1),
    ("I'm not sure if it is major.", KEY, -1),
    ("The song features piano and drums.", INSTR, -1),
    ("I'm not sure.", O4, -1),
    ("E", O4, -1),
    ("Answer: E", O4, -1),
    ("", O4, -1),
    ("A beautiful track with a lot of reverb.", O4, -1),
]


@pytest.mark.parametrize("text,options,expected", PARSE_CASES)
def test_parse_choice(text: str, options: list[str], expected: int) -> None:
    assert parse_choice(text, options) == expected


# --------------------------------------------------------------------------- judges via registry


def test_judges_registered() -> None:
    assert "lexicon" in JUDGES and "mcq_string" in JUDGES


def test_lexicon_judge_via_registry() -> None:
    judge = JUDGES.build("lexicon", vocabulary="instrument")
    assert judge.name == "lexicon" and judge.version == "2"
    out = judge.judge(["Double bass, no drums.", None, "Nothing here."], [None, None, None])
    assert out == [
        {"extracted": ["bass"]},
        {"extracted": None, "error": "no response"},
        {"extracted": []},
    ]
    assert JUDGES.build("lexicon").lexicon is INSTRUMENT_LEXICON
    with pytest.raises(KeyError):
        JUDGES.build("lexicon", vocabulary="nope")
    with pytest.raises(ValueError):
        judge.judge(["a"], [])


def test_mcq_judge_via_registry() -> None:
    judge = JUDGES.build("mcq_string")
    assert judge.name == "mcq_string" and judge.version == "1"
    out = judge.judge(
        ["Answer: (B)", "I think it's (A) or (B)", None, "minor"],
        [O4, O4, O4, KEY],
    )
    assert out == [
        {"parsed_index": 1},
        {"parsed_index": -1},
        {"parsed_index": None, "error": "no response"},
        {"parsed_index": 1},
    ]
