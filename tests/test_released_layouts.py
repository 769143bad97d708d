"""The MuChoMusic and HumMusQA loaders on files laid out as released, without renaming anything.

Fixtures (written here, a few rows and short synthetic clips) follow the released code and cards:
MuChoMusic's ``muchomusic_eval/utils.py`` (identifiers ending in ``.json``, MusicCaps ids with a
``_k`` suffix, ``sdd/audio/<path>.2min.mp3`` from ``song_describer.csv``, MusicCaps
``[ytid]-[start-end].wav`` from ``musiccaps-public.csv``) and the HumMusQA card (every column a
string, excerpt times included).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.core import audio
from evalcore.datasets.base import DatasetContext
from evalcore.datasets.hummusqa import HumMusQA
from evalcore.datasets.muchomusic import MuChoMusic, audio_id
from evalcore.datasets.tabular import seconds
from evalcore.datasets.validate import validate_items

YTIDS = ("-0Gj8-vB1q4", "a_b-Cd3_EfG")  # 11 characters, with the "-" and "_" YouTube ids may hold


def _clip(path: Path, seconds_: float = 1.0, sr: int = 16000, fmt: str = "WAV") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds_ * sr)) / sr
    sf.write(path, (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), sr, format=fmt)


def write_muchomusic(data: Path, *, musiccaps_csv: bool = True, download_names: bool = False,
                     extra_questions: int = 0) -> Path:
    """A released-layout MuChoMusic ``data`` folder: the CSV, SDD and MusicCaps metadata and clips (plus
    ``extra_questions`` more questions on the first Song Describer track)."""
    rows = [
        {"question": "What is the mood?", "correct_answer": "Calm", "distractor_1_answer": "Tense",
         "distractor_2_answer": "A piano plays", "distractor_3_answer": "A car", "dataset": "sdd",
         "dataset_identifier": "415600.json", "genre": "Folk, World, & Country",
         "music_knowledge": "['Mood and expression']", "music_reasoning": "[]"},
        {"question": "Which instrument leads?", "correct_answer": "Violin", "distractor_1_answer": "Flute",
         "distractor_2_answer": "It is slow", "distractor_3_answer": "Bananas", "dataset": "sdd",
         "dataset_identifier": "1051398.json", "genre": "Classical", "music_knowledge": "['Instrumentation']",
         "music_reasoning": "['Genre and style']"},
        {"question": "What is the tempo?", "correct_answer": "Fast", "distractor_1_answer": "Slow",
         "distractor_2_answer": "A guitar", "distractor_3_answer": "Rain", "dataset": "musiccaps",
         "dataset_identifier": f"{YTIDS[0]}_1.json", "genre": "Rock", "music_knowledge": "[]",
         "music_reasoning": "['Tempo']"},
        {"question": "Who sings?", "correct_answer": "A woman", "distractor_1_answer": "A man",
         "distractor_2_answer": "Drums", "distractor_3_answer": "A dog", "dataset": "musiccaps",
         "dataset_identifier": f"{YTIDS[1]}_0.json", "genre": "Pop", "music_knowledge": "['Vocals']",
         "music_reasoning": "[]"},
    ]
    rows += [{**rows[0], "question": f"Which word fits the piece best ({k})?", "correct_answer": f"Word {k}",
              "distractor_1_answer": f"Other {k}", "music_knowledge": "[]", "music_reasoning": "['Mood']"}
             for k in range(extra_questions)]
    data.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(data / "muchomusic.csv", index=False)
    sdd = data / "sdd"
    sdd.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"caption_id": [1, 2], "track_id": [415600, 1051398], "caption": ["a", "b"],
                  "path": ["00/415600.mp3", "98/1051398.mp3"]}).to_csv(sdd / "song_describer.csv", index=False)
    _clip(sdd / "audio" / "00" / "415600.2min.mp3", 2.0, fmt="MP3")
    _clip(sdd / "audio" / "98" / "1051398.2min.mp3", 2.0, fmt="MP3")
    mc = data / "musiccaps"
    if musiccaps_csv:
        mc.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"ytid": list(YTIDS), "start_s": [30, 0], "end_s": [40, 10]}).to_csv(
            mc / "musiccaps-public.csv", index=False)
    for ytid, (s, e) in zip(YTIDS, ((30, 40), (0, 10))):
        _clip(mc / "audio" / (f"{ytid}_{s}.wav" if download_names else f"[{ytid}]-[{s}-{e}].wav"), 1.0)
    return data


def _ctx(tmp_path: Path, name: str = "d") -> DatasetContext:
    return DatasetContext(name=name, run_root=str(tmp_path / "run"), seed=0)


def test_released_identifiers() -> None:
    assert audio_id("sdd", "415600.json") == "415600"
    assert audio_id("musiccaps", "-0Gj8-vB1q4_1.json") == "-0Gj8-vB1q4"
    assert audio_id("musiccaps", "a_b-Cd3_EfG_0.json") == "a_b-Cd3_EfG"  # only the last "_k" goes
    assert audio_id("musiccaps", "-0Gj8-vB1q4") == "-0Gj8-vB1q4"  # not the released form: kept


@pytest.mark.parametrize("musiccaps_csv,download_names", [(True, False), (False, False), (False, True)])
def test_muchomusic_reads_the_released_audio_layout(tmp_path: Path, musiccaps_csv: bool, download_names: bool):
    data = write_muchomusic(tmp_path / "data", musiccaps_csv=musiccaps_csv, download_names=download_names)
    rows = list(MuChoMusic(str(data / "muchomusic.csv"), audio_root=str(data)).items(_ctx(tmp_path)))
    good, bad = validate_items("mucho", rows)
    assert not bad and len(good) == 4
    uris = [g["audio_uri"] for g in good]
    assert uris[0] == str(data / "sdd" / "audio" / "00" / "415600.2min.mp3")
    assert uris[1] == str(data / "sdd" / "audio" / "98" / "1051398.2min.mp3")
    names = [f"{YTIDS[0]}_30.wav", f"{YTIDS[1]}_0.wav"] if download_names else \
        [f"[{YTIDS[0]}]-[30-40].wav", f"[{YTIDS[1]}]-[0-10].wav"]
    assert uris[2:] == [str(data / "musiccaps" / "audio" / n) for n in names]
    for u in uris:  # every clip is found and decodes
        assert len(audio.load(u, 16000, None, None)) > 0
    meta = [json.loads(g["metadata"]) for g in good]
    assert meta[0]["genre"] == ["Folk, World, & Country"] and meta[2]["audio_id"] == YTIDS[0]


def test_muchomusic_without_sdd_metadata_uses_the_folder_rule_and_names_missing_clips(tmp_path: Path) -> None:
    data = write_muchomusic(tmp_path / "data", musiccaps_csv=False)
    (data / "sdd" / "song_describer.csv").unlink()
    (data / "musiccaps" / "audio" / f"[{YTIDS[1]}]-[0-10].wav").unlink()
    rows = list(MuChoMusic(str(data / "muchomusic.csv"), audio_root=str(data)).items(_ctx(tmp_path)))
    assert rows[1]["audio_uri"] == str(data / "sdd" / "audio" / "98" / "1051398.2min.mp3")  # 1051398 mod 100
    good, bad = validate_items("mucho", rows)
    assert len(good) == 3 and len(bad) == 1 and "audio_uri" in bad[0]["error"]
    assert "no MusicCaps file" in json.loads(rows[3]["metadata"])["audio_error"]


def test_seconds_from_released_time_strings() -> None:
    assert [seconds(v) for v in ("30", "30.5", "1:05", "0:01:05.5", 12, None, "")] == [30.0, 30.5, 65.0, 65.5, 12.0,
                                                                                       None, None]
    assert seconds("thirty") == "thirty" and seconds("1:75") == "1:75"  # left for validation to report


def write_hummusqa(path: Path) -> Path:
    """A HumMusQA Parquet with the released string columns and embedded audio."""
    def wav(sec: float) -> dict:
        import io

        buf = io.BytesIO()
        sf.write(buf, np.zeros(int(sec * 8000), dtype=np.float32), 8000, format="WAV")
        return {"bytes": buf.getvalue(), "path": "track.wav"}

    cols = {"identifier": ["h1", "h2", "h3", "h4"], "question": ["Q1?", "Q2?", "Q3?", "Q4?"],
            "answer": ["a1", "a2", "a3", "a4"], "distractor_1": ["b1", "b2", "b3", "b4"],
            "distractor_2": ["c1", "c2", "c3", "c4"], "distractor_3": ["d1", "d2", "d3", "d4"],
            "main_category": ["Harmony", "Melody", "Harmony", "Lyrics"],
            "secondary_categories": ["['Melody']", "[]", "Instrumentation, Melody", ""],
            "difficulty": ["Low", "Medium", "High", "Low"],
            "excerpt_start_time": ["0", "1.5", "0:02", "0"], "excerpt_end_time": ["2", "3", "0:03.5", "2.5"],
            "song_link": ["l"] * 4, "jamendo_id": ["111", "111", "222", "222"], "song_name": ["s"] * 4,
            "artist_name": ["a"] * 4, "album_name": ["b"] * 4, "song_license_url": ["u"] * 4}
    schema = pa.schema([(k, pa.string()) for k in cols]
                       + [("audio", pa.struct([("bytes", pa.binary()), ("path", pa.string())]))])
    pq.write_table(pa.Table.from_pydict({**cols, "audio": [wav(4.0), wav(4.0), wav(5.0), wav(5.0)]}, schema=schema),
                   path)
    return path


def test_hummusqa_released_string_columns(tmp_path: Path) -> None:
    p = write_hummusqa(tmp_path / "hummusqa.parquet")
    assert set(pq.read_schema(p).types[:-1]) == {pa.string()}  # the released types
    rows = list(HumMusQA(str(p)).items(_ctx(tmp_path, "hum")))
    good, bad = validate_items("hum", rows)
    assert not bad and len(good) == 4
    assert [(g["excerpt_start"], g["excerpt_end"]) for g in good] == [(0.0, 2.0), (1.5, 3.0), (2.0, 3.5), (0.0, 2.5)]
    assert [json.loads(g["metadata"])["secondary_categories"] for g in good] == [
        ["Melody"], [], ["Instrumentation", "Melody"], []]
