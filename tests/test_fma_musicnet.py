"""FMA and MusicNet loaders on fixtures in the official metadata formats; factual prompt sets,
binary-choice and true/false items."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from evalcore.runconfig.config import ProtocolConfig
from evalcore.datasets import factual_formats as ff
from evalcore.datasets.base import DatasetContext
from evalcore.datasets.base import DATASETS
from evalcore.datasets.fma import FMA, audio_path
from evalcore.datasets.musicnet import MusicNet
from evalcore.datasets.validate import validate_items
from evalcore.protocols import factual_prompts as fp
from evalcore.protocols.prompts import render
from evalcore.scorers.factual_modes import aggregate_answers
from evalcore.vocab import FMA_GENRES, MUSICNET_COMPOSERS, MUSICNET_INSTRUMENTS, normalize

# --- FMA: tracks.csv as released (two header rows, then the ``track_id,,,…`` index-name row) ---
TRACKS_CSV = """\
,album,artist,set,set,track,track,track,track
,title,name,split,subset,genre_top,genres,genres_all,title
track_id,,,,,,,,
2,AWOL - A Way Of Life,AWOL,training,small,Hip-Hop,[21],[21],Food
3,AWOL - A Way Of Life,AWOL,training,medium,Hip-Hop,[21],[21],Electric Ave
5,AWOL - A Way Of Life,AWOL,training,small,Hip-Hop,[21],[21],This World
10,Constant Hitmaker,Kurt Vile,training,small,Pop,[10],[10],Freeway
20,Niris,Nicky Cook,training,large,,"[76, 103]","[17, 10, 76, 103]",Spiritual Level
99,Untitled,Nobody,test,small,,[],[],Silence
140,Look Into The Sun,Alec K. Redfearn,test,small,Folk,[17],[17],Queen Of The Wires
1482,Wax,Tech Unit,validation,small,Electronic,[181],"[15, 181]",Pulse
123456,Noise Floor,The Amps,training,small,Rock,[1000],"[12, 25, 1000]","Loud, Fast"
"""
GENRES_CSV = """\
genre_id,#tracks,parent,title,top_level
10,13845,0,Pop,10
12,32923,0,Rock,12
15,34413,0,Electronic,15
17,12706,0,Folk,17
21,8389,0,Hip-Hop,21
25,9261,12,Punk,12
76,1007,10,Experimental Pop,10
103,4018,17,Singer-Songwriter,17
181,1624,15,Techno,15
1000,12,25,Hardcore,12
"""


def _ctx(tmp_path):
    return DatasetContext(name="d", run_root=str(tmp_path / "run"), seed=0)


@pytest.fixture
def fma_files(tmp_path):
    (tmp_path / "tracks.csv").write_text(TRACKS_CSV)
    (tmp_path / "genres.csv").write_text(GENRES_CSV)
    return {"tracks": str(tmp_path / "tracks.csv"), "genres": str(tmp_path / "genres.csv"),
            "audio_root": "/data/fma_small"}


def test_fma_genre_small(tmp_path, fma_files):
    rows = list(FMA(**fma_files).items(_ctx(tmp_path)))
    good, bad = validate_items("fma", rows)
    assert [r["item_id"] for r in rows] == ["000002", "000005", "000010", "000099", "000140", "001482", "123456"]
    assert [b["item_id"] for b in bad] == ["000099"] and "labels" in bad[0]["error"]
    by = {g["item_id"]: g for g in good}
    assert by["000002"]["labels"] == ["hip-hop"] and by["000010"]["labels"] == ["pop"]
    assert by["123456"]["labels"] == ["rock"] and by["001482"]["labels"] == ["electronic"]
    assert all(g["protocol"] == "factual" and g["task"] == "genre" for g in good)
    assert by["000002"]["question"] == "What is the genre of this song?"
    assert by["000002"]["audio_uri"] == "/data/fma_small/000/000002.mp3"
    assert by["123456"]["audio_uri"] == "/data/fma_small/123/123456.mp3"
    meta = json.loads(by["123456"]["metadata"])
    assert meta["track_id"] == 123456 and meta["genre_ids"] == [1000]
    assert meta["genre_paths"] == [["rock", "punk", "hardcore"]]
    assert meta["subset"] == "small" and meta["split"] == "training" and meta["title"] == "Loud, Fast"
    assert all(lab in FMA_GENRES for g in good for lab in g["labels"])


def test_fma_subset_split_limit(tmp_path, fma_files):
    ids = lambda **kw: [r["item_id"] for r in FMA(**fma_files, **kw).items(_ctx(tmp_path))]  # noqa: E731
    assert "000003" not in ids() and "000003" in ids(subset="medium") and "000020" not in ids(subset="medium")
    assert len(ids(subset="large")) == len(ids(subset="full")) == 9
    assert ids(split="test") == ["000099", "000140"] and ids(split="validation") == ["001482"]
    assert ids(limit=2) == ["000002", "000005"]
    with pytest.raises(ValueError, match="subset"):
        FMA(**fma_files, subset="tiny")
    with pytest.raises(ValueError, match="split"):
        FMA(**fma_files, split="train")
    with pytest.raises(ValueError, match="task"):
        FMA(**fma_files, task="mood")


def test_fma_genre_node_and_derived_top(tmp_path, fma_files):
    rows = {r["item_id"]: r for r in FMA(**fma_files, subset="large", task="genre-node").items(_ctx(tmp_path))}
    good, bad = validate_items("fma", rows.values())
    assert [b["item_id"] for b in bad] == ["000099"]
    assert rows["123456"]["labels"] == ["hardcore"] and rows["001482"]["labels"] == ["techno"]
    assert rows["000020"]["labels"] == ["experimental pop", "singer-songwriter"]
    assert rows["000020"]["task"] == "genre-node"
    # genre_top empty because the genres span two trees → no top-level label for the genre task
    top = {r["item_id"]: r for r in FMA(**fma_files, subset="large").items(_ctx(tmp_path))}
    assert top["000020"]["labels"] is None
    assert json.loads(top["000020"]["metadata"])["genre_paths"] == [["pop", "experimental pop"],
                                                                     ["folk", "singer-songwriter"]]


def test_fma_without_index_name_row_and_registry(tmp_path, fma_files):
    (tmp_path / "tracks.csv").write_text("".join(
        line for line in TRACKS_CSV.splitlines(keepends=True) if not line.startswith("track_id")))
    ds = DATASETS.build("fma", **fma_files, limit=3)
    assert [r["item_id"] for r in ds.items(_ctx(tmp_path))] == ["000002", "000005", "000010"]
    assert audio_path("s3://b/fma_full", 155320) == "s3://b/fma_full/155/155320.mp3"


# --- MusicNet: musicnet_metadata.csv + per-recording label CSVs (GM program numbers) ---
META_CSV = """\
id,composer,composition,movement,ensemble,source,transcriber,catalog_name,seconds
1727,Schubert,Piano Quintet in A major,2. Andante,Piano Quintet,European Archive,http://tirolmusic.blogspot.com,D667,447
2186,Bach,Violin Partita No 2 in D minor,1. Allemande,Solo Violin,Museopen,Bach Violin Partitas,BWV1004,270
2295,Mozart,Serenade in E-flat major,1. Allegro maestoso,Wind Octet,Soundcloud,Ludwig,K375,406
2202,Bach,Flute Sonata in E minor,3. Allegro,Accompanied Flute,Museopen,Bach Flute Sonatas,BWV1034,180
2628,Dvořák,String Quartet No 12,1. Allegro ma non troppo,String Quartet,Musopen,Dvorak Quartets,OP96,520
9999,Beethoven,Missing Labels,1. Allegro,Solo Piano,Musopen,,OP2NO1,300
"""
LABEL_HEADER = "start_time,end_time,instrument,note,start_beat,end_beat,note_value\n"


def _labels(programs):
    lines = [f"{9182 + 4000 * k},{90078 + 4000 * k},{p},{53 + k},{4.0 + k},1.5,Dotted Quarter\n"
             for k, p in enumerate(programs)]
    return LABEL_HEADER + "".join(lines)


@pytest.fixture
def musicnet_files(tmp_path):
    (tmp_path / "musicnet_metadata.csv").write_text(META_CSV)
    train, test = tmp_path / "train_labels", tmp_path / "test_labels"
    train.mkdir()
    test.mkdir()
    (train / "1727.csv").write_text(_labels([1, 41, 42, 43, 44, 41, 1]))
    (train / "2186.csv").write_text(_labels([41, 41]))
    (train / "2295.csv").write_text(_labels([72, 69, 71, 61, 72]))
    (test / "2202.csv").write_text(_labels([74, 7]))
    (train / "2628.csv").write_text(_labels([41, 42, 43]))
    return {"metadata": str(tmp_path / "musicnet_metadata.csv"), "labels_root": str(train),
            "audio_root": "/data/musicnet/train_data", "test_labels": str(test)}


def test_musicnet_instruments(tmp_path, musicnet_files):
    files = dict(musicnet_files)
    files.pop("test_labels")
    rows = list(MusicNet(**files).items(_ctx(tmp_path)))
    good, bad = validate_items("musicnet", rows)
    by = {g["item_id"]: g for g in good}
    assert by["1727"]["labels"] == ["piano", "violin", "viola", "cello", "bass"]
    assert by["2186"]["labels"] == ["violin"]
    assert by["2295"]["labels"] == ["horn", "oboe", "bassoon", "clarinet"]
    assert by["1727"]["audio_uri"] == "/data/musicnet/train_data/1727.wav"
    assert by["1727"]["question"] == "Which instruments are used in this piece of music?"
    assert by["1727"]["category"] == "Piano Quintet" and by["1727"]["task"] == "instrument"
    meta = json.loads(by["1727"]["metadata"])
    assert meta["programs"] == [1, 41, 42, 43, 44] and meta["seconds"] == 447.0 and meta["catalog_name"] == "D667"
    # 2202's labels live in the test folder; 9999 has none anywhere → error rows
    assert sorted(b["item_id"] for b in bad) == ["2202", "9999"]
    assert all("labels" in b["error"] for b in bad)
    missing = next(r for r in rows if r["item_id"] == "9999")
    assert "not found" in json.loads(missing["metadata"])["labels_error"]


def test_musicnet_gm_programs_and_paired_folders(tmp_path, musicnet_files):
    gm = {1: "piano", 7: "harpsichord", 41: "violin", 42: "viola", 43: "cello", 44: "bass", 61: "horn",
          69: "oboe", 71: "bassoon", 72: "clarinet", 74: "flute"}
    assert {p: normalize(str(p), "instrument") for p in gm} == gm
    assert sorted(gm.values()) == sorted(MUSICNET_INSTRUMENTS)
    roots = [musicnet_files["labels_root"], musicnet_files["test_labels"]]
    ds = MusicNet(musicnet_files["metadata"], labels_root=roots,
                  audio_root=["/mn/train_data", "/mn/test_data"])
    rows = {r["item_id"]: r for r in ds.items(_ctx(tmp_path))}
    assert rows["2202"]["labels"] == ["harpsichord", "flute"]
    assert rows["2202"]["audio_uri"] == "/mn/test_data/2202.wav"
    assert rows["1727"]["audio_uri"] == "/mn/train_data/1727.wav"
    assert rows["9999"]["labels"] is None
    with pytest.raises(ValueError, match="pair"):
        MusicNet(musicnet_files["metadata"], labels_root=["a", "b"], audio_root="c")


def test_musicnet_bad_label_files(tmp_path, musicnet_files):
    root = tmp_path / "train_labels"
    (root / "2186.csv").write_text(LABEL_HEADER)  # header only: no notes
    (root / "2295.csv").write_text(_labels(["piano"]))  # not a program number
    (root / "2628.csv").write_text(_labels([41, 5]))  # program outside the MusicNet map stays visible
    rows = {r["item_id"]: r for r in MusicNet(musicnet_files["metadata"], labels_root=str(root),
                                              audio_root="/a").items(_ctx(tmp_path))}
    assert rows["2186"]["labels"] is None and "no notes" in json.loads(rows["2186"]["metadata"])["labels_error"]
    assert rows["2295"]["labels"] is None and "General MIDI" in json.loads(rows["2295"]["metadata"])["labels_error"]
    assert rows["2628"]["labels"] == ["violin", "5"]


def test_musicnet_composer_and_limit(tmp_path, musicnet_files):
    ds = DATASETS.build("musicnet", metadata=musicnet_files["metadata"], audio_root="/a", task="composer")
    rows = list(ds.items(_ctx(tmp_path)))
    good, bad = validate_items("musicnet", rows)
    assert not bad and len(good) == 6  # composer labels need no label CSV
    assert [g["labels"] for g in good] == [["schubert"], ["bach"], ["mozart"], ["bach"], ["dvorak"], ["beethoven"]]
    assert all(g["labels"][0] in MUSICNET_COMPOSERS for g in good)
    assert good[0]["question"] == "Which classical composer's style does this piece resemble the most?"
    assert len(list(MusicNet(musicnet_files["metadata"], audio_root="/a", task="composer",
                             limit=2).items(_ctx(tmp_path)))) == 2
    with pytest.raises(ValueError, match="labels_root"):
        MusicNet(musicnet_files["metadata"], audio_root="/a", task="instrument")


# --- prompt sets ---
def test_prompt_sets_render_with_vocabulary():
    for task in ("genre", "genre-tree", "genre-node", "instrument", "composer"):
        raw = fp.prompts_for(task)
        assert len(raw) == 4 and "{vocabulary}" in raw["among"]
        v = fp.variants(task)
        ProtocolConfig(name="factual", variants=v)  # valid config templates
        assert "{vocabulary}" not in v["among"]
    among = render(fp.variants("instrument")["among"], "q", None)
    assert among == ("Among piano, harpsichord, violin, viola, cello, bass, horn, oboe, bassoon, clarinet, flute, "
                     "which instruments are used in this piece of music?")
    assert render(fp.variants("genre", ["a{b}", "c"], names=["among"])["among"], "q", None).startswith("Among a{b}, c,")
    assert fp.PROMPTS["genre"]["fall-under"] == "What genre does this piece of music fall under?"
    with pytest.raises(ValueError):
        fp.variants("instrument", names=["nope"])
    ProtocolConfig(name="mcq", variants=fp.BINARY_VARIANTS)
    ProtocolConfig(name="factual", variants=fp.TRUE_FALSE_VARIANTS)


# --- binary choice ---
def _factual(n, task="genre", vocab=FMA_GENRES):
    return [{"item_id": f"i{k}", "protocol": "factual", "task": task, "audio_uri": f"/a/{k}.mp3",
             "question": "q", "labels": [vocab[k % len(vocab)]] if task == "genre" else list(vocab[:1 + k % 3])}
            for k in range(n)]


def test_binary_choice_balance_and_reproducibility():
    items = _factual(2000)
    out = ff.binary_choice_items(items, FMA_GENRES, seed=7, order="coin")
    good, bad = validate_items("fma", out)
    assert len(good) == 2000 and not bad
    firsts = [json.loads(o["metadata"])["correct_first"] for o in out]
    assert 0.46 < sum(firsts) / len(firsts) < 0.54
    for src, o in zip(items, out):
        meta = json.loads(o["metadata"])
        assert o["options"][o["correct_option"]] == meta["truth"] == src["labels"][0]
        distractor = o["options"][1 - o["correct_option"]]
        assert distractor not in src["labels"] and distractor in FMA_GENRES
        assert o["question"] == (f"Between {o['options'][0]} and {o['options'][1]}, "
                                 "what is a better description of the genre of this piece?")
        assert o["protocol"] == "binary_choice" and o["audio_uri"] == src["audio_uri"]
    assert ff.binary_choice_items(items, FMA_GENRES, seed=7, order="coin") == out
    assert ff.binary_choice_items(items, FMA_GENRES, seed=8, order="coin") != out
    # per-item draws: a sub-list gets the same questions
    assert ff.binary_choice_items(items[5:9], FMA_GENRES, seed=7, order="coin") == out[5:9]
    # distractors spread over the vocabulary
    assert len(Counter(o["options"][1 - o["correct_option"]] for o in out)) == len(FMA_GENRES)
    # the default (the paper's "correct answer first in 50 % of the prompts"): exactly half, same labels
    balanced = ff.binary_choice_items(items[:301], FMA_GENRES, seed=7)
    assert sum(json.loads(o["metadata"])["correct_first"] for o in balanced) == 150
    assert [set(o["options"]) for o in balanced] == [set(o["options"]) for o in out[:301]]
    with pytest.raises(ValueError, match="binary_order"):
        ff.binary_choice_items(items, FMA_GENRES, seed=7, order="alternate")


def test_binary_choice_multilabel_and_errors():
    items = _factual(30, task="instrument", vocab=MUSICNET_INSTRUMENTS)
    out = ff.binary_choice_items(items, MUSICNET_INSTRUMENTS, seed=0)
    for src, o in zip(items, out):
        truth = o["options"][o["correct_option"]]
        assert truth in src["labels"] and o["options"][1 - o["correct_option"]] not in src["labels"]
    bad_items = [{"item_id": "x", "protocol": "factual", "task": "composer", "audio_uri": "/a", "question": "q",
                  "labels": None},
                 {"item_id": "y", "protocol": "factual", "task": "composer", "audio_uri": "/a", "question": "q",
                  "labels": ["bach", "mozart"]},
                 {"item_id": "z", "protocol": "mcq", "options": ["a", "b"], "correct_option": 0}]
    out = ff.binary_choice_items(bad_items, ["bach", "mozart"], seed=0)
    good, bad = validate_items("m", out)
    assert len(out) == 2 and not good and all("2 options" in b["error"] for b in bad)


# --- true/false ---
def test_true_false_expansion():
    items = _factual(3, task="instrument", vocab=MUSICNET_INSTRUMENTS)  # 1, 2 and 3 true labels
    items.append({**items[0], "item_id": "nolabels", "labels": None})
    out = ff.true_false_items(items, MUSICNET_INSTRUMENTS)
    assert len(out) == 4 * len(MUSICNET_INSTRUMENTS)
    good, bad = validate_items("musicnet", out)
    assert len(good) == 3 * 11 and len(bad) == 11
    assert Counter(g["labels"][0] for g in good) == {"yes": 1 + 2 + 3, "no": 33 - 6}
    row = next(g for g in good if g["item_id"] == "i1:tf:harpsichord")
    assert row["question"] == "Is harpsichord used in this song?" and row["labels"] == ["yes"]
    assert row["category"] == "harpsichord" and row["task"] == "instrument-true-false"
    assert json.loads(row["metadata"]) == {"source_item_id": "i1", "source_task": "instrument",
                                           "label": "harpsichord", "present": True,
                                           "source_labels": ["piano", "harpsichord"]}
    assert aggregate_answers([False, True, None], "any") is True
    assert aggregate_answers([False, True, None], "majority") is False
