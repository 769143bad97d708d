"""Factual QA: the lexicon extractor on realistic Music-LM answers, vocabularies, hierarchy modes,
per-label metrics and chunk aggregation."""

from __future__ import annotations

import math

import pytest

from evalcore.scorers.factual import set_scores
from evalcore.scorers.factual_modes import (
    aggregate_answers, apply_mode, mode_scores, per_label, true_false_labels, union_labels,
)
from evalcore.vocab import (
    FMA_GENRES, LEXICONS, MUSICNET_COMPOSERS, MUSICNET_INSTRUMENTS, extract, lexicon_name, normalize, read_vocab_file,
    restrict, vocabulary,
)

# (task, model answer, hand labels in order of first mention) — labelled by the paper's rules
# (App. B.1): exact mentions only, no guessing, comparatives keep the preferred one, canonical forms.
ANSWERS: list[tuple[str, str, list[str]]] = [
    # ---- instruments (MusicNet vocabulary)
    ("instrument", "The piece is performed by a solo piano.", ["piano"]),
    ("instrument", "I can hear a violin, a viola and a cello, so this is likely a string trio.", ["violin", "viola", "cello"]),
    ("instrument", "Instruments: double bass and horns.", ["bass", "horn"]),
    ("instrument", "This sounds like a string quartet: two violins, viola and cello.", ["violin", "viola", "cello"]),
    ("instrument", "A harpsichord accompanies the flute throughout.", ["harpsichord", "flute"]),
    ("instrument", "The main melody is carried by the oboe, with bassoon and clarinet underneath.", ["oboe", "bassoon", "clarinet"]),
    ("instrument", "There is no piano in this recording; it's a wind quintet with flute, oboe, clarinet, French horn and bassoon.", ["flute", "oboe", "clarinet", "horn", "bassoon"]),
    ("instrument", "It might be a violin, or possibly a viola.", ["violin", "viola"]),
    ("instrument", "The instrument sounds more like a cello than a double bass.", ["cello"]),
    ("instrument", "A grand piano and cellos.", ["piano", "cello"]),
    ("instrument", "I hear a violine and a piano playing together.", ["violin", "piano"]),
    ("instrument", "The pianist plays alongside a cellist.", ["piano", "cello"]),
    ("instrument", "This music features guitar, drums and vocals.", []),
    ("instrument", "I'm not sure which instruments are used.", []),
    ("instrument", "The contrabass provides the low end while the violins play the melody.", ["bass", "violin"]),
    ("instrument", "A clarinet rather than an oboe plays the solo.", ["clarinet"]),
    ("instrument", "The music is played on a piano. There are no strings or winds.", ["piano"]),
    ("instrument", "The song is played by an orchestra with strings, brass and woodwinds.", []),
    ("instrument", "Solo violin without any accompaniment, no piano.", ["violin"]),
    ("instrument", "I think it's a fortepiano, maybe a harpsicord.", ["piano", "harpsichord"]),
    ("instrument", "The instruments used are: piano, violin, cello.", ["piano", "violin", "cello"]),
    ("instrument", "A bass clarinet and a flute.", ["clarinet", "flute"]),
    ("instrument", "An English horn solo over violas.", ["viola"]),
    ("instrument", "The horn section plays a fanfare, followed by the flutes.", ["horn", "flute"]),
    ("instrument", "The bassoons and oboes alternate, with a horn pedal.", ["bassoon", "oboe", "horn"]),
    ("instrument", "It's a piano-like sound, perhaps an electric keyboard.", []),
    ("instrument", "Neither violin nor viola is present; the cello plays alone.", ["cello"]),
    ("instrument", "The track features a synth bass, electric guitar and a drum machine.", []),
    ("instrument", "Two violins, a viola, a cello and a double bass form a string quintet.", ["violin", "viola", "cello", "bass"]),
    ("instrument", "Piano, piano and more piano.", ["piano"]),
    # ---- genres (FMA top level)
    ("genre", "The genre of the song is rock.", ["rock"]),
    ("genre", "This is a hip hop track with heavy beats.", ["hip-hop"]),
    ("genre", "It sounds more like jazz than blues.", ["jazz"]),
    ("genre", "This piece falls under electronic music, possibly electronica.", ["electronic"]),
    ("genre", "I would classify it as folk or country.", ["folk", "country"]),
    ("genre", "The song has a swing rhythm and a walking bass line.", []),
    ("genre", "It's a pop song with some R&B influences.", ["pop", "soul-rnb"]),
    ("genre", "This is not rock, it's pop.", ["pop"]),
    ("genre", "Genre: Experimental", ["experimental"]),
    ("genre", "The track is instrumental, with a calm and relaxing atmosphere.", ["instrumental"]),
    ("genre", "It has a jazz-like feeling but is mostly classical.", ["classical"]),
    ("genre", "A classical guitar piece in the style of folk music.", ["folk"]),
    ("genre", "This is a rap song.", []),
    ("genre", "It sounds like soul music from the 60s.", ["soul-rnb"]),
    ("genre", "The recording is old-time music, perhaps an historic field recording.", ["old-time / historic"]),
    ("genre", "The genre is international, maybe world music.", ["international"]),
    ("genre", "It's a spoken word piece over ambient sounds.", ["spoken"]),
    ("genre", "Electronic, rock, pop.", ["electronic", "rock", "pop"]),
    ("genre", "I'm not sure of the genre, but it could be easy listening.", ["easy listening"]),
    ("genre", "This is a drum and bass track.", []),
    ("genre", "This song is blues rather than rock.", ["blues"]),
    ("genre", "It is an upbeat EDM track.", ["electronic"]),
    ("genre", "A mixture of rock and roll and hip-hop.", ["rock", "hip-hop"]),
    # ---- composers (MusicNet)
    ("composer", "This piece resembles the style of J. S. Bach.", ["bach"]),
    ("composer", "It sounds like Beethoven's late string quartets.", ["beethoven"]),
    ("composer", "The style is closer to Mozart than to Haydn.", ["mozart"]),
    ("composer", "This could be Brahms or Schubert.", ["brahms", "schubert"]),
    ("composer", "It sounds like a work by Antonín Dvořák.", ["dvorak"]),
    ("composer", "The piece resembles Fauré's chamber music.", ["faure"]),
    ("composer", "It is reminiscent of Ravel, maybe Debussy.", ["ravel"]),
    ("composer", "This sounds like a Baroque composer, perhaps Vivaldi.", []),
    ("composer", "The piece resembles the style of Johann Sebastian Bach and not Mozart.", ["bach"]),
    ("composer", "Wolfgang Amadeus Mozart.", ["mozart"]),
    ("composer", "It sounds like Beethovan.", ["beethoven"]),
    ("composer", "I think it is Cambini, a lesser-known classical composer.", ["cambini"]),
    ("composer", "It is a romantic piece, probably by Schubert rather than Brahms.", ["schubert"]),
    ("composer", "The piece sounds like Haydn's symphonies.", ["haydn"]),
    ("composer", "I'm not sure which composer this is.", []),
    ("composer", "Dvorak, Brahms, and Schubert are all possibilities.", ["dvorak", "brahms", "schubert"]),
    # ---- more, harder
    ("instrument", "No vocals, just a piano and some violins.", ["piano", "violin"]),
    ("instrument", "Cellos and violas, but no violins.", ["cello", "viola"]),
    ("instrument", "I believe the flute is accompanied by a harpsichord, although it could be a piano.", ["flute", "harpsichord", "piano"]),
    ("instrument", "The instrumentation consists of oboe, two French horns and strings.", ["oboe", "horn"]),
    ("instrument", "There isn't a clarinet here, it's a bassoon.", ["bassoon"]),
    ("genre", "Rap/hip-hop with a jazzy sample.", ["hip-hop"]),
    ("genre", "It has elements of both pop and rock, but mainly pop.", ["pop", "rock"]),
    ("genre", "The song could be described as folk-rock.", ["folk", "rock"]),
    ("genre", "Definitely not country; I'd say blues.", ["blues"]),
    ("composer", "Not Bach; more likely Mozart or Haydn.", ["mozart", "haydn"]),
    ("composer", "This could be a piano sonata by Schubert or Beethoven.", ["schubert", "beethoven"]),
]


def _extract(task: str, text: str) -> list[str]:
    return extract(text, LEXICONS[lexicon_name(task)])


@pytest.mark.parametrize("task,text,expected", ANSWERS)
def test_lexicon_extractor_on_model_answers(task: str, text: str, expected: list[str]) -> None:
    assert _extract(task, text) == expected


def test_lexicon_extractor_micro_f1_against_hand_labels() -> None:
    assert len(ANSWERS) >= 60
    tp = fp = fn = 0.0
    for task, text, expected in ANSWERS:
        s = set_scores(_extract(task, text), expected)
        tp, fp, fn = tp + s["tp"], fp + s["fp"], fn + s["fn"]
    f1 = 2 * tp / (2 * tp + fp + fn)
    print(f"lexicon extractor micro F1 vs hand labels over {len(ANSWERS)} answers: {f1:.4f}")
    assert f1 >= 0.95


def test_every_extracted_label_is_in_the_task_vocabulary() -> None:
    for task, text, _ in ANSWERS:
        assert set(_extract(task, text)) <= set(vocabulary(task)), text


# --------------------------------------------------------------------------- vocabularies


def test_vocabularies() -> None:
    assert len(FMA_GENRES) == 16 and "old-time / historic" in FMA_GENRES and "soul-rnb" in FMA_GENRES
    assert all(g == g.lower() for g in FMA_GENRES)
    assert sorted(LEXICONS["musicnet_instrument"].labels) == sorted(MUSICNET_INSTRUMENTS)
    assert len(MUSICNET_INSTRUMENTS) == 11 and len(MUSICNET_COMPOSERS) == 10
    assert vocabulary("genre-tree") == vocabulary("genre") == FMA_GENRES
    assert {"genre", "composer", "instrument"} <= set(LEXICONS)
    with pytest.raises(ValueError):
        vocabulary("tempo")


@pytest.mark.parametrize("label,task,expected", [
    ("Acoustic Grand Piano", "instrument", "piano"),
    ("Electric Grand Piano", "instrument", "piano"),
    ("French Horn", "instrument", "horn"),
    ("Contrabass", "instrument", "bass"),
    ("Double Bass", "instrument", "bass"),
    ("Violin", "instrument", "violin"),
    ("44", "instrument", "bass"),
    ("1", "instrument", "piano"),
    ("Hip-Hop", "genre", "hip-hop"),
    ("Old-Time / Historic", "genre", "old-time / historic"),
    ("Soul-RnB", "genre", "soul-rnb"),
    ("Easy Listening", "genre", "easy listening"),
    ("Post-Rock", "genre-tree", "post-rock"),  # no normalisation beyond lowercase for genres
    ("Rock Music Classics", "genre", "rock music classics"),
    ("J.S. Bach", "composer", "bach"),
    ("Bach", "composer", "bach"),
    ("Dvořák", "composer", "dvorak"),
    ("Antonín Dvořák", "composer", "dvorak"),
    ("Fauré", "composer", "faure"),
    ("  Unknown Composer ", "composer", "unknown composer"),
])
def test_normalize_ground_truth(label: str, task: str, expected: str) -> None:
    assert normalize(label, task) == expected


def test_genre_lexicon_does_not_guess() -> None:
    genre = LEXICONS["genre"]
    assert extract("Rap with a swing rhythm, bluesy and jazzy, world music, techno.", genre) == []
    assert extract("Hiphop, R&B, rhythm and blues and Rock 'n' Roll.", genre) == ["hip-hop", "soul-rnb", "rock"]


def test_restrict_keeps_blocking_phrases() -> None:
    small = restrict(LEXICONS["instrument"], ["piano", "bass"])
    assert small.labels == ["piano", "bass"]
    # "bass clarinet" is still one (ignored) phrase, not a bass; guitars are no longer labels
    assert extract("A bass clarinet, an electric guitar, a grand piano.", small) == ["piano"]
    assert extract("More guitar than piano.", small) == []  # the comparative still sees the guitar
    extra = restrict(LEXICONS["instrument"], ["piano", "theremin"], {"theremin": ["etherphone"]})
    assert extract("An etherphone and thereminS over a piano", extra) == ["theremin", "piano"]


def test_read_vocab_file(tmp_path) -> None:
    txt = tmp_path / "v.txt"
    txt.write_text("# instruments\nPiano: keys, ivories\n\nlute\n", encoding="utf-8")
    assert read_vocab_file(txt) == {"piano": ["keys", "ivories"], "lute": []}
    js = tmp_path / "v.json"
    js.write_text('["Lute", "piano"]', encoding="utf-8")
    assert read_vocab_file(js) == {"lute": [], "piano": []}
    js.write_text('{"lute": ["oud"]}', encoding="utf-8")
    assert read_vocab_file(js) == {"lute": ["oud"]}
    js.write_text('{"lute": "oud"}', encoding="utf-8")
    with pytest.raises(ValueError):
        read_vocab_file(js)
    txt.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(ValueError):
        read_vocab_file(txt)


# --------------------------------------------------------------------------- hierarchy modes

TREE = {"techno": "electronic", "house": "electronic", "electronic": "electronic",
        "punk": "rock", "post-rock": "rock", "rock": "rock", "rap": "hip-hop"}


def test_mode_top_compares_top_level_genres() -> None:
    assert apply_mode(["techno", "punk"], ["house"], TREE, "top") == (["electronic", "rock"], ["electronic"])
    s = mode_scores(["techno", "punk"], ["house"], TREE, "top")
    assert (s["tp"], s["fp"], s["fn"]) == (1, 1, 0) and s["precision"] == 0.5 and s["recall"] == 1.0


def test_mode_same_tree_credits_labels_in_the_truth_tree() -> None:
    # techno lies in the tree of electronic → credited as electronic
    assert mode_scores(["techno"], ["electronic"], TREE, "same-tree")["f1"] == 1.0
    # a sibling of the true sub-genre is in the same tree too
    assert mode_scores(["house"], ["techno"], TREE, "same-tree")["f1"] == 1.0
    # two predictions in one tree count once
    s = mode_scores(["techno", "house"], ["electronic"], TREE, "same-tree")
    assert (s["tp"], s["fp"], s["fn"]) == (1, 0, 0)
    # another tree: FP + FN
    s = mode_scores(["punk"], ["electronic"], TREE, "same-tree")
    assert (s["tp"], s["fp"], s["fn"]) == (0, 1, 1)
    # an unknown genre is its own tree; exact matches credit themselves
    assert apply_mode(["jazz", "punk"], ["punk", "post-rock"], TREE, "same-tree") == (["jazz", "punk"],
                                                                                     ["punk", "post-rock"])


def test_mode_same_node_is_exact() -> None:
    s = mode_scores(["techno"], ["electronic"], TREE, "same-node")
    assert (s["tp"], s["fp"], s["fn"]) == (0, 1, 1)
    assert mode_scores(["rap"], ["rap"], TREE, "same-node")["f1"] == 1.0
    with pytest.raises(ValueError):
        apply_mode([], [], TREE, "same-leaf")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- per-label metrics


def test_per_label_metrics() -> None:
    items = [(["piano", "violin"], ["piano"]), (["piano"], ["piano", "cello"]), ([], ["cello"]), (["violin"], [])]
    m = per_label(items)
    assert list(m) == ["cello", "piano", "violin"]
    assert m["piano"] == {"tp": 2.0, "fp": 0.0, "fn": 0.0, "support": 2.0, "precision": 1.0, "recall": 1.0,
                          "f1": 1.0}
    assert m["cello"]["support"] == 2 and m["cello"]["recall"] == 0.0 and math.isnan(m["cello"]["precision"])
    assert m["cello"]["f1"] == 0.0
    assert m["violin"]["fp"] == 2 and m["violin"]["precision"] == 0.0 and math.isnan(m["violin"]["recall"])
    assert per_label([]) == {}


def test_per_label_f1_mixed() -> None:
    m = per_label([(["rock"], ["rock"]), (["rock"], ["pop"]), (["pop"], ["rock"])])
    assert m["rock"]["precision"] == 0.5 and m["rock"]["recall"] == 0.5 and m["rock"]["f1"] == 0.5
    assert m["pop"]["tp"] == 0 and m["pop"]["f1"] == 0.0


# --------------------------------------------------------------------------- chunk aggregation


def test_union_labels_keeps_first_appearance() -> None:
    assert union_labels([["piano", "violin"], None, ["cello", "piano"], [], ["violin", "horn"]]) == [
        "piano", "violin", "cello", "horn"]
    assert union_labels([]) == []


@pytest.mark.parametrize("answers,any_,majority", [
    ([True], True, True),
    ([False], False, False),
    ([True, False, False], True, False),
    ([True, True, False], True, True),
    ([True, False], True, False),  # a tie is no
    ([True, None, None], True, True),  # unanswered chunks are ignored
    ([False, None], False, False),
    ([None, None], None, None),
    ([], None, None),
])
def test_true_false_chunk_aggregation(answers, any_, majority) -> None:
    assert aggregate_answers(answers, "any") is any_
    assert aggregate_answers(answers, "majority") is majority


def test_true_false_labels_and_bad_rule() -> None:
    answers = {"piano": [True, False, False], "violin": [True, True, False], "horn": [False, False], "oboe": []}
    assert true_false_labels(answers, "any") == ["piano", "violin"]
    assert true_false_labels(answers, "majority") == ["violin"]
    with pytest.raises(ValueError):
        aggregate_answers([True], "all")  # type: ignore[arg-type]
