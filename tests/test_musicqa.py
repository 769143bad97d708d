"""MusicQA loader: the real released file, and malformed rows becoming error rows."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from evalcore.datasets.base import DATASETS, DatasetContext
from evalcore.datasets.musicqa import CAPTIONING_QUESTIONS
from evalcore.datasets.validate import validate_items

from data_paths import MUSICQA_JSON as DATA, missing  # noqa: E402
CTX = DatasetContext(name="musicqa", run_root="/tmp", seed=0)


def _load(path: Path, **params):
    return validate_items("musicqa", DATASETS.build("musicqa", path=str(path), **params).items(CTX))


@pytest.fixture(scope="module")
def real():
    if not DATA.is_file():
        pytest.skip(missing(DATA))
    return json.loads(DATA.read_text()), _load(DATA, audio_root="s3://bucket/jamendo")


def test_real_file_all_rows_become_items(real):
    rows, (items, errors) = real
    assert errors == [] and len(items) == len(rows) == 5040
    assert len({i["item_id"] for i in items}) == 5040
    assert items[0]["item_id"] == "012542-0" and items[0]["audio_uri"] == "s3://bucket/jamendo/012542.wav"
    for row, item in zip(rows, items):  # order kept, texts unchanged
        assert item["question"] == row["conversation"][0]["value"]
        assert item["reference"] == row["conversation"][1]["value"]
        assert item["protocol"] == "freeform" and json.loads(item["metadata"])["audio_name"] == row["audio_name"]


def test_captioning_subset_is_four_per_clip(real):
    rows, (items, _) = real
    clips = {r["audio_name"] for r in rows}
    cap = [i for i in items if i["task"] == "captioning"]
    assert len(clips) == 560 and len(cap) == 4 * len(clips)
    per_clip = Counter(json.loads(i["metadata"])["audio_name"] for i in cap)
    assert set(per_clip.values()) == {4}
    # the constant is exactly the set of questions asked of every clip
    asked = Counter(r["conversation"][0]["value"] for r in rows)
    assert {q for q, n in asked.items() if n == len(clips)} == set(CAPTIONING_QUESTIONS)


def test_limit_and_local_audio(tmp_path, real):
    items, errors = _load(DATA, limit=10)
    assert len(items) == 10 and not errors and items[0]["audio_uri"] == "012542.wav"


def _turn(frm, value):
    return {"from": frm, "value": value}


def test_malformed_rows_become_error_rows(tmp_path):
    ok = {"audio_name": "a.wav", "conversation": [_turn("human", "Describe the audio"), _turn("gpt", "Rock.")]}
    rows = [
        ok,
        ok,  # duplicate question/answer of the same clip: distinct id a-1
        {"audio_name": "a.wav"},  # no conversation
        {"audio_name": "b.wav", "conversation": [_turn("gpt", "x"), _turn("human", "y")]},  # roles swapped
        {"audio_name": "b.wav", "conversation": [_turn("human", "Q?"), _turn("gpt", 3)]},  # non-string answer
        {"audio_name": "b.wav", "conversation": [_turn("human", "Q?")]},  # one turn
        {"conversation": ok["conversation"]},  # no audio_name
        "not an object",
        {"audio_name": "b.wav", "conversation": [_turn("human", "What is the tempo?"), _turn("gpt", "Fast.")]},
    ]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(rows))
    items, errors = _load(path)
    assert [i["item_id"] for i in items] == ["a-0", "a-1", "b-3"]
    assert [i["task"] for i in items] == ["captioning", "captioning", "qa"]
    assert len(errors) == 6 and all(e["error_stage"] == "load" for e in errors)
    reasons = " | ".join(e["error"] for e in errors)
    for what in ("list of 2 turns", "roles", "non-empty strings", "missing audio_name", "not a JSON object"):
        assert what in reasons
