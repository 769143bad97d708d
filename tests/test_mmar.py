"""MMAR: the loader reads the released metadata unrenamed (tests/fixtures/mmar: ``MMAR-meta.jsonl`` in the
released fields and layout, and the earlier ``MMAR-meta.json`` list form), and the ``mcq_mmar`` judge follows
github.com/ddlBoJack/MMAR ``code/evaluation.py``, whose ``string_match`` is MMAU's rule (held case by case
against the transcription of the published function in tests/test_mmau.py)."""

from __future__ import annotations

import json
import pathlib

import pytest

from evalcore.datasets.base import DatasetContext
from evalcore.datasets.mmar import MMAR
from evalcore.datasets.validate import validate_items
from evalcore.judges.mmar import McqMmarJudge
from test_mmau import published_verdict

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "mmar"

SCALES = ["Major scale", "Minor scale", "Whole-tone scale", "Pentatonic scale"]
LOUDNESS = ["From quiet to loud", "From loud to quiet", "Remains unchanged"]
YES_NO = ["Yes", "No"]
GAME = ["Word guessing game", "Number guessing game", "Do not do challenge"]  # the released "" choice dropped

# (response, choices, answer, evalcore's parsed index, the published verdict) — MMAR's shapes: 2 to 4 choices,
# shared words, yes/no questions, reasoning text before the answer
CASES = [
    ("Pentatonic scale", SCALES, "Pentatonic scale", 3, True),
    ("It is pentatonic.", SCALES, "Pentatonic scale", -1, False),  # "scale" missing
    ("The melody uses a pentatonic scale", SCALES, "Pentatonic scale", 3, True),
    ("Not a major scale but a pentatonic scale", SCALES, "Pentatonic scale", -1, False),  # "major" spoils it
    ("From loud to quiet", LOUDNESS, "From quiet to loud", -1, True),  # one word set: credited by the scorer
    ("Remains unchanged", LOUDNESS, "From quiet to loud", 2, False),
    ("Yes", YES_NO, "Yes", 0, True),
    ("Yes, there is a drum solo.", YES_NO, "Yes", 0, True),
    ("No.", YES_NO, "Yes", 1, False),
    ("B", YES_NO, "No", -1, False),
    ("Word guessing game", GAME, "Word guessing game", 0, True),
    ("A guessing game", GAME, "Word guessing game", -1, False),
    ("I cannot hear the audio.", GAME, "Word guessing game", -1, False),
]


@pytest.mark.parametrize(("response", "choices", "answer", "index", "verdict"), CASES,
                         ids=[f"{i}:{c[0][:30]}" for i, c in enumerate(CASES)])
def test_judge_follows_the_published_rule(response, choices, answer, index, verdict) -> None:
    assert published_verdict(answer, response, choices) is verdict
    (got,) = McqMmarJudge().judge([response], [choices])
    assert got["parsed_index"] == index


def _items(tmp_path, path, **params):
    ds = MMAR(path=str(path), **params)
    return validate_items("mmar", ds.items(DatasetContext("mmar", str(tmp_path), 0)))


def test_loader_reads_the_music_related_modalities(tmp_path) -> None:
    released = [json.loads(line) for line in (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines()]
    assert {"id", "audio_path", "question", "choices", "answer", "modality", "category", "sub-category", "language",
            "source", "url", "timestamp", "thinking", "cue", "rubric"} == set(released[0])
    good, bad = _items(tmp_path, FIXTURES / "MMAR-meta.jsonl")
    assert bad == []
    assert [g["item_id"] for g in good] == [r["id"] for r in released if "music" in r["modality"]]
    assert [g["task"] for g in good] == ["music", "music", "mix-music-speech", "mix-sound-music"]
    first = good[0]
    assert first["options"] == released[0]["choices"] and first["correct_option"] == 3
    assert pathlib.Path(first["audio_uri"]) == FIXTURES / "audio" / f"{released[0]['id']}.wav"
    assert pathlib.Path(first["audio_uri"]).is_file()
    assert first["category"] == "Perception Layer"
    assert json.loads(first["metadata"])["secondary_categories"] == ["Music Theory"]
    game = good[2]  # released with an empty "" fourth choice: left out, and counted
    assert game["options"] == GAME and json.loads(game["metadata"])["dropped_empty_choices"] == 1
    assert len(good[3]["options"]) == 2


def test_loader_reads_the_earlier_json_list_and_flags_bad_records(tmp_path) -> None:
    released = [json.loads(line) for line in (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines()]
    released[1] = {**released[1], "answer": "From near to far"}  # not one of its choices
    path = tmp_path / "MMAR-meta.json"
    path.write_text(json.dumps([*released, "not a record"]))
    good, bad = _items(tmp_path, path, modalities=["music", "sound"], audio_root=str(FIXTURES))
    assert [g["task"] for g in good] == ["music", "sound"]
    assert len(bad) == 2
    assert "is not one of its choices" in bad[0]["error"] and "not an object" in bad[1]["error"]


def test_an_unreadable_jsonl_line_is_an_error_row(tmp_path) -> None:
    lines = (FIXTURES / "MMAR-meta.jsonl").read_text().splitlines()
    path = tmp_path / "MMAR-meta.jsonl"
    path.write_text("\n".join([lines[0], "{broken", lines[1]]) + "\n")
    good, bad = _items(tmp_path, path, audio_root=str(FIXTURES))
    assert len(good) == 2 and len(bad) == 1 and "line 2 of" in bad[0]["error"] and "invalid JSON" in bad[0]["error"]
