"""A factual fixture run through the real pipeline (local Ray): FMA and MusicNet fixtures in their
official formats, genre (top level, same tree, same node), instruments and composer, plus the
binary-choice and true/false formats, chunked audio and a second (agreement) judge."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.runconfig.config import parse_config
from evalcore.datasets.synthetic import ClipSpec, synthesize_clip
from evalcore.pipeline.run import run

pytestmark = pytest.mark.ray

SR = 22_050
TRACKS_CSV = """\
,album,artist,set,set,track,track,track,track
,title,name,split,subset,genre_top,genres,genres_all,title
track_id,,,,,,,,
2,AWOL - A Way Of Life,AWOL,training,small,Hip-Hop,[21],[21],Food
10,Constant Hitmaker,Kurt Vile,training,small,Pop,[10],[10],Freeway
140,Look Into The Sun,Alec K. Redfearn,test,small,Folk,[17],[17],Queen Of The Wires
1482,Wax,Tech Unit,validation,small,Electronic,[181],"[15, 181]",Pulse
"""
GENRES_CSV = """\
genre_id,#tracks,parent,title,top_level
10,13845,0,Pop,10
15,34413,0,Electronic,15
17,12706,0,Folk,17
21,8389,0,Hip-Hop,21
181,1624,15,Techno,15
"""
META_CSV = """\
id,composer,composition,movement,ensemble,source,transcriber,catalog_name,seconds
2202,Bach,Flute Sonata in E minor,3. Allegro,Accompanied Flute,Museopen,Bach Flute Sonatas,BWV1034,8
1727,Schubert,Piano Quintet in A major,2. Andante,Piano Quintet,European Archive,tirolmusic,D667,8
"""
LABELS = "start_time,end_time,instrument,note,start_beat,end_beat,note_value\n"


def _clip(instruments: tuple[str, ...], seconds: float, seed: int) -> np.ndarray:
    return synthesize_clip(ClipSpec(f"c{seed}", 100.0, "C", "major", instruments, seconds, seed), SR)


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory, local_ray):
    tmp = tmp_path_factory.mktemp("factual")
    (tmp / "tracks.csv").write_text(TRACKS_CSV)
    (tmp / "genres.csv").write_text(GENRES_CSV)
    for k, tid in enumerate((2, 10, 140, 1482)):
        path = tmp / "fma_small" / f"{tid:06d}"[:3] / f"{tid:06d}.mp3"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, _clip(("guitar", "drums"), 3.0, k), SR, format="MP3")
    (tmp / "musicnet_metadata.csv").write_text(META_CSV)
    (tmp / "labels").mkdir()
    (tmp / "audio").mkdir()
    (tmp / "labels" / "2202.csv").write_text(LABELS + "0,1000,74,60,0,1,Quarter\n9000,9900,44,40,4,1,Quarter\n")
    (tmp / "labels" / "1727.csv").write_text(LABELS + "0,1000,1,60,0,1,Quarter\n0,1000,41,67,0,1,Quarter\n")
    # 2202: 4 s of flute, then 4 s of bass → two 4 s chunks that hear different instruments
    sf.write(tmp / "audio" / "2202.wav", np.concatenate([_clip(("flute",), 4.0, 11), _clip(("bass",), 4.0, 12)]), SR)
    sf.write(tmp / "audio" / "1727.wav", _clip(("organ",), 8.0, 13), SR)

    fma = {"tracks": str(tmp / "tracks.csv"), "genres": str(tmp / "genres.csv"), "audio_root": str(tmp / "fma_small")}
    mn = {"metadata": str(tmp / "musicnet_metadata.csv"), "audio_root": str(tmp / "audio")}
    cfg = parse_config({
        "name": "factual-fixture",
        "datasets": [
            {"name": "fma-genre", "kind": "fma", "params": {**fma, "task": "genre",
                                                           "formats": ["standard", "binary_choice"]}},
            {"name": "fma-tree", "kind": "fma", "params": {**fma, "task": "genre-tree"}},
            {"name": "fma-node", "kind": "fma", "params": {**fma, "task": "genre-node"}},
            {"name": "mn-instrument", "kind": "musicnet",
             "params": {**mn, "labels_root": str(tmp / "labels"), "task": "instrument",
                        "formats": ["standard", "true_false", "binary_choice"], "format_seed": 3}},
            {"name": "mn-composer", "kind": "musicnet",
             "params": {**mn, "task": "composer", "formats": ["standard", "binary_choice"]}},
        ],
        "models": [
            {"name": "listener", "kind": "dsp_listener", "params": {"max_audio_seconds": None},
             "chunk_seconds": 4.0, "resources": {"num_cpus": 0.5, "batch_size": 16}},
            {"name": "prior", "kind": "text_prior", "resources": {"num_cpus": 0.25, "batch_size": 16}},
        ],
        "protocols": [
            {"name": "factual", "conditions": ["correct", "random"],
             "judge": {"kind": "lexicon", "params": {"vocabulary": "auto", "tree": str(tmp / "genres.csv")}},
             "agreement_judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}},
            {"name": "true_false", "conditions": ["correct", "random"]},
            {"name": "binary_choice", "conditions": ["correct", "random"]},
        ],
        "storage": {"root": str(tmp / "run")},
        "stats": {"bootstrap_resamples": 200},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
    })
    res = run(cfg)
    tables = f"{cfg.root}/tables"
    return (res, pq.read_table(f"{tables}/per_item.parquet").to_pandas(),
            pq.read_table(f"{tables}/summary.parquet").to_pandas(),
            pq.read_table(f"{tables}/agreement.parquet").to_pandas())


def _value(summary, **where):
    s = summary[(summary["kind"] == "value")]
    for k, v in where.items():
        s = s[s[k] == v]
    assert len(s) == 1, where
    return s.iloc[0]


def test_every_request_is_scored_and_every_task_has_summary_rows(fixture_run):
    res, per_item, summary, _ = fixture_run
    c = res.counts
    assert c["requests_errored"] == 0 and c["requests_scored"] == c["requests_in"] == len(per_item)
    # items: FMA 4 per task (+4 binary), MusicNet instruments 2 (+22 true/false, +2 binary), composers 2 (+2 binary)
    assert c["items_valid"] == 4 + 4 + 4 + 4 + (2 + 22 + 2) + (2 + 2)
    assert c["requests_in"] == c["items_valid"] * 2 * 2  # × models × conditions
    assert set(per_item["protocol"]) == {"factual", "true_false", "binary_choice"}
    for ds in ("fma-genre", "fma-tree", "fma-node", "mn-instrument", "mn-composer"):
        for model in ("listener", "prior"):
            for metric in ("f1_micro", "f1_macro", "precision_micro", "recall_micro"):
                _value(summary, protocol="factual", dataset=ds, model=model, metric=metric, condition="correct",
                       group="all")
    for ds in ("fma-genre", "mn-instrument", "mn-composer"):
        _value(summary, protocol="binary_choice", dataset=ds, model="prior", metric="accuracy", condition="correct",
               group="all")
    for rule in ("any", "majority"):
        for metric in ("accuracy", "precision", "recall", "f1", "answered"):
            _value(summary, protocol="true_false", dataset="mn-instrument", model="listener",
                   metric=f"{metric}_{rule}", condition="correct", group="all")
        _value(summary, protocol="true_false", dataset="mn-instrument", model="listener",
               metric=f"accuracy_{rule}", condition="correct", group="label=flute")


def test_genre_modes_in_the_run(fixture_run):
    _, per_item, summary, _ = fixture_run
    prior = per_item[(per_item["model"] == "prior") & (per_item["condition"] == "correct")
                     & (per_item["protocol"] == "factual")]
    # the text prior always says "an upbeat pop song …": pop is extracted for every genre task
    for ds in ("fma-genre", "fma-tree", "fma-node"):
        rows = prior[prior["dataset"] == ds].set_index("item_id")
        assert all(list(x) == ["pop"] for x in rows["extracted"]), ds
        assert rows.loc["000010", "f1"] == 1.0 and rows.loc["000002", "f1"] == 0.0
    node = prior[prior["dataset"] == "fma-node"].set_index("item_id")
    assert list(node.loc["001482", "labels"]) == ["techno"] and node.loc["001482", "fn"] == 1.0
    # one pop track of four: micro F1 = 2·1 / (2·1 + 3 + 3)
    f1 = _value(summary, protocol="factual", dataset="fma-genre", model="prior", metric="f1_micro",
                condition="correct", group="all")
    assert f1.value == pytest.approx(0.25) and f1.n == 4


def test_chunked_labels_are_united(fixture_run):
    _, per_item, _, _ = fixture_run
    rows = per_item[(per_item["protocol"] == "factual") & (per_item["dataset"] == "mn-instrument")
                    & (per_item["model"] == "listener")].set_index(["item_id", "condition"])
    # 2202 is heard as flute in its first chunk and bass in its second: the union is its ground truth
    assert set(rows.loc[("2202", "correct"), "extracted"]) == {"flute", "bass"}
    assert rows.loc[("2202", "correct"), "f1"] == 1.0
    assert list(rows.loc[("1727", "correct"), "extracted"]) == []  # organ: outside the MusicNet vocabulary
    # random audio: 1727's question hears 2202's flute and bass (not its piano and violin)
    assert rows.loc[("1727", "random"), "tp"] == 0 and rows.loc[("1727", "random"), "fp"] == 2


def test_true_false_and_binary_choice_rows(fixture_run):
    _, per_item, summary, _ = fixture_run
    tf = per_item[(per_item["protocol"] == "true_false") & (per_item["model"] == "listener")
                  & (per_item["condition"] == "correct")].set_index("item_id")
    assert len(tf) == 22
    # "featuring flute." (chunk 1) → yes; chunk 2 does not name flute → unanswered; any = majority = yes
    for label in ("flute", "bass"):
        row = tf.loc[f"2202:tf:{label}"]
        assert row["answer_any"] == 1.0 and row["answer_majority"] == 1.0 and row["correct_any"] == 1.0
    assert np.isnan(tf.loc["2202:tf:piano", "answer_any"]) and tf.loc["2202:tf:piano", "correct_any"] == 0.0
    acc = _value(summary, protocol="true_false", dataset="mn-instrument", model="listener", metric="accuracy_any",
                 condition="correct", group="all")
    assert acc.value == pytest.approx(tf["correct_any"].mean()) and acc.n == 2  # units: recordings
    bc = per_item[(per_item["protocol"] == "binary_choice") & (per_item["dataset"] == "mn-instrument")
                  & (per_item["model"] == "listener") & (per_item["condition"] == "correct")].set_index("item_id")
    assert bc.loc["2202:binary", "correct"] == 1.0  # "I can hear flute." / "I can hear bass." names the truth
    prior = per_item[(per_item["protocol"] == "binary_choice") & (per_item["dataset"] == "fma-genre")
                     & (per_item["model"] == "prior") & (per_item["condition"] == "correct")]
    # "an upbeat pop song": answered only where pop is one of the two options
    assert ((prior["answered"] == 1.0) == prior["options"].map(lambda o: "pop" in list(o))).all()


def test_agreement_of_the_two_judges(fixture_run):
    _, _, summary, agreement = fixture_run
    assert set(agreement["protocol"]) == {"factual"}
    mn = agreement[(agreement["dataset"] == "mn-instrument") & (agreement["model"] == "listener")
                   & (agreement["condition"] == "correct")].set_index("item_id")
    # 2202: both judges read flute and bass; 1727 "I can hear organ.": organ is only in the second vocabulary
    assert list(mn.loc["2202", "judge_labels"]) == list(mn.loc["2202", "agreement_labels"]) == ["flute", "bass"]
    assert list(mn.loc["1727", "judge_labels"]) == [] and list(mn.loc["1727", "agreement_labels"]) == ["organ"]
    exact = _value(summary, protocol="factual", dataset="mn-instrument", model="listener", metric="agreement_exact",
                   condition="correct", group="all")
    f1 = _value(summary, protocol="factual", dataset="mn-instrument", model="listener", metric="agreement_f1",
                condition="correct", group="all")
    assert exact.value == 0.5 and f1.value == pytest.approx(2 * 2 / (2 * 2 + 0 + 1))
    # the prior's "pop song … with guitar, drums and vocals": genre vs instrument labels never agree
    prior = agreement[(agreement["dataset"] == "fma-genre") & (agreement["model"] == "prior")]
    assert not prior["exact"].any() and (prior["jaccard"] == 0).all()
