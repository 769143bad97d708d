"""MuChoMusic CSV and HumMusQA Parquet/CSV loaders, on fixtures in the released formats."""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.datasets.base import DatasetContext
from evalcore.datasets.hummusqa import HumMusQA
from evalcore.datasets.muchomusic import MuChoMusic
from evalcore.datasets.validate import validate_items

MUCHO = [
    {"question": "What is the mood of the piece?", "correct_answer": "Melancholic",
     "distractor_1_answer": "Joyful", "distractor_2_answer": "It features a piano",
     "distractor_3_answer": "The Eiffel Tower", "dataset": "musiccaps", "dataset_identifier": "-0Gj8-vB1q4",
     "genre": "['Classical', 'Ambient']", "music_knowledge": "['Mood']", "music_reasoning": "[]"},
    {"question": "Which instrument leads?", "correct_answer": "Violin", "distractor_1_answer": "Flute",
     "distractor_2_answer": "The tempo is slow", "distractor_3_answer": "Bananas", "dataset": "sdd",
     "dataset_identifier": "1001", "genre": "Rock, Pop", "music_knowledge": "[]",
     "music_reasoning": "['Instrumentation']"},
    {"question": "", "correct_answer": "x", "distractor_1_answer": "y", "distractor_2_answer": "z",
     "distractor_3_answer": "w", "dataset": "sdd", "dataset_identifier": "1002", "genre": "", "music_knowledge": "",
     "music_reasoning": ""},
]


def _ctx(tmp_path, name="d"):
    return DatasetContext(name=name, run_root=str(tmp_path / "run"), seed=0)


def test_muchomusic_csv(tmp_path):
    p = tmp_path / "muchomusic.csv"
    pd.DataFrame(MUCHO).to_csv(p, index=False)
    rows = list(MuChoMusic(str(p), audio_root="/audio", audio_pattern="{dataset}/{dataset_identifier}.wav")
                .items(_ctx(tmp_path)))
    good, bad = validate_items("mucho", rows)
    assert len(good) == 2 and len(bad) == 1 and "question" in bad[0]["error"]
    first = good[0]
    assert first["options"] == ["Melancholic", "Joyful", "It features a piano", "The Eiffel Tower"]
    assert first["correct_option"] == 0 and first["audio_uri"] == "/audio/musiccaps/-0Gj8-vB1q4.wav"
    meta = json.loads(first["metadata"])
    assert meta["genre"] == ["Classical", "Ambient"] and meta["option_types"] == ["correct", "IR", "CU", "IU"]
    assert json.loads(good[1]["metadata"])["genre"] == ["Rock, Pop"]  # one genre string, kept whole


def test_muchomusic_distractor_ablation(tmp_path):
    p = tmp_path / "m.csv"
    pd.DataFrame(MUCHO[:1]).to_csv(p, index=False)
    (item,) = MuChoMusic(str(p), audio_root="/a", distractors=["IU", "IR"]).items(_ctx(tmp_path))
    assert item["options"] == ["Melancholic", "Joyful", "The Eiffel Tower"]
    assert json.loads(item["metadata"])["option_types"] == ["correct", "IR", "IU"]
    with pytest.raises(ValueError, match="subset"):
        MuChoMusic(str(p), audio_root="/a", distractors=["XX"])


def _wav_bytes(seconds=1.0, sr=8000):
    buf = io.BytesIO()
    sf.write(buf, np.zeros(int(seconds * sr), dtype=np.float32), sr, format="WAV")
    return buf.getvalue()


HUM = {"identifier": ["h1", "h2", "h3"], "question": ["Q1?", "Q2?", "Q3?"], "answer": ["a1", "a2", "a3"],
       "distractor_1": ["b1", "b2", "b3"], "distractor_2": ["c1", "c2", "c3"], "distractor_3": ["d1", "d2", None],
       "main_category": ["Melody", "Rhythm", "Timbre"], "secondary_categories": [["Harmony"], [], ["Form"]],
       "difficulty": ["Low", "Medium", "High"], "excerpt_start_time": [10.0, 30.0, 0.0],
       "excerpt_end_time": [40.0, 90.0, 30.0], "jamendo_id": ["111", "111", "222"]}


def test_hummusqa_parquet_with_embedded_audio(tmp_path):
    audio = [{"bytes": _wav_bytes(), "path": "t111.wav"}, {"bytes": _wav_bytes(), "path": "t111.wav"},
             {"bytes": _wav_bytes(2.0), "path": "t222.wav"}]
    p = tmp_path / "hum.parquet"
    pq.write_table(pa.Table.from_pydict({**HUM, "audio": audio}), p)
    rows = list(HumMusQA(str(p)).items(_ctx(tmp_path, "hum")))
    good, bad = validate_items("hum", rows)
    assert [g["item_id"] for g in good] == ["h1", "h2"] and "options" in bad[0]["error"]
    assert good[0]["audio_uri"] == good[1]["audio_uri"]  # one track, written once
    assert good[0]["audio_uri"].startswith(str(tmp_path / "run" / "dataset_audio" / "hum"))
    assert sf.info(good[0]["audio_uri"]).frames == 8000
    assert (good[0]["excerpt_start"], good[0]["excerpt_end"]) == (10.0, 40.0)
    assert good[1]["category"] == "Rhythm" and good[1]["difficulty"] == "Medium"
    assert json.loads(good[0]["metadata"]) == {"jamendo_id": "111", "secondary_categories": ["Harmony"]}


def test_hummusqa_csv_release(tmp_path):
    df = pd.DataFrame({k: v for k, v in HUM.items()})
    df["secondary_categories"] = ["['Harmony']", "[]", "['Form']"]
    df["excerpt_start_time"] = ["10", "thirty", "0"]
    p = tmp_path / "hum.csv"
    df.to_csv(p, index=False)
    rows = list(HumMusQA(str(p), audio_root="s3://bucket/jamendo").items(_ctx(tmp_path)))
    good, bad = validate_items("hum", rows)
    assert good[0]["audio_uri"] == "s3://bucket/jamendo/111.mp3"
    reasons = " ".join(b["error"] for b in bad)
    assert "excerpt_start" in reasons and "options" in reasons and len(good) == 1


def test_a_dataset_s_error_row_is_a_type_not_a_string():
    """A dataset yields ``BadItem(reason)`` for a record it cannot read: its reason becomes the load error row's;
    a bare string is data like any other non-mapping (never taken for a reason)."""
    from evalcore.datasets.base import BadItem
    from evalcore.datasets.validate import validate_items

    good, errors = validate_items("d", [BadItem("line 2: invalid JSON (Expecting value)"), "line 3: looks like a reason"])
    assert good == [] and [e["error"] for e in errors] == ["item row #0: line 2: invalid JSON (Expecting value)",
                                                           "item row #1: not a mapping (str)"]
    assert {e["error_stage"] for e in errors} == {"load"} and {e["error_class"] for e in errors} == {"input"}
