"""True/false and binary-choice formats: strict answer readers, scorers, chunk aggregation (60 s
chunks, union of labels, any/majority), their wiring into the run's tables, and the lexicon judge
per task with an FMA genre tree."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.runconfig.config import CHUNK_SECONDS_PAPER, ModelConfig, parse_config
from evalcore.datasets import factual_formats as ff
from evalcore.datasets.validate import validate_items
from evalcore.judges.base import JUDGES
from evalcore.judges.yes_no import read_choice, read_yes_no
from evalcore.pipeline.finish import finish
from evalcore.pipeline.resources import chunk_window
from evalcore.pipeline.stages import Decoder, judge_batch
from evalcore.protocols.requests import expand_requests
from evalcore.scorers.factual_formats import BinaryChoiceScorer, TrueFalseScorer, combine_choices, recording_id
from evalcore.scoring.requests import merge_chunks


# --------------------------------------------------------------------------- true/false reader

@pytest.mark.parametrize("text,label,expected", [
    ("Yes, the piano is used.", "piano", True),
    ("Yes", None, True),
    ("Answer: True", "piano", True),
    ("Definitely, you can hear it.", "piano", True),
    ("I think so.", "piano", True),
    ("No.", "piano", False),
    ("No, there is no piano in this song.", "piano", False),
    ("Nope", None, False),
    ("Definitely not.", "piano", False),
    ("I don't think so.", "piano", False),
    ("False", "piano", False),
    # hedges → unanswered, even with an answer word
    ("Maybe.", "piano", None),
    ("Yes, probably.", "piano", None),
    ("It might be a piano.", "piano", None),
    ("I'm not sure.", "piano", None),
    ("It is hard to tell.", "piano", None),
    ("I cannot determine that from the audio.", "piano", None),
    # both ways → unanswered
    ("Yes and no.", "piano", None),
    ("Yes. No, wait.", "piano", None),
    # no answer word: the asked label decides when named
    ("The piano is clearly used throughout.", "piano", True),
    ("Pianos carry the melody.", "piano", True),
    ("There is no piano in this recording.", "piano", False),
    ("It sounds more like a viola than a violin.", "violin", False),
    ("The piano? Yes.", "piano", True),
    ("No doubt, a piano is used.", "piano", True),
    ("The song features guitar and drums.", "piano", None),  # other instruments only: not inferred
    ("Double bass and cello.", "bass", True),  # synonyms of the MusicNet lexicon
    ("", "piano", None),
    ("The song features guitar and drums.", None, None),
])
def test_read_yes_no(text, label, expected):
    assert read_yes_no(text, label) is expected


def test_no_random_fallback_for_unanswered():
    # the same unanswerable text is unanswered every time, whatever the label
    for label in ("piano", "violin", "flute", None):
        assert {read_yes_no("Hmm, hard to say.", label) for _ in range(5)} == {None}
        assert {read_choice("Hmm, hard to say.", ["piano", "violin"]) for _ in range(5)} == {-1}


# --------------------------------------------------------------------------- binary-choice reader

@pytest.mark.parametrize("text,options,expected", [
    ("Rock.", ["rock", "pop"], 0),
    ("The genre is pop.", ["rock", "pop"], 1),
    ("Between rock and pop, the genre is rock.", ["rock", "pop"], 0),  # the echoed question is not an answer
    ("It is rock rather than pop.", ["rock", "pop"], 0),  # comparative: the preferred one
    ("More like pop than rock.", ["rock", "pop"], 1),
    ("Not pop; it's rock.", ["rock", "pop"], 0),
    ("Both rock and pop.", ["rock", "pop"], -1),  # both
    ("Pop music with rock influences.", ["rock", "pop"], -1),  # both named
    ("Neither, it is jazz.", ["rock", "pop"], -1),  # neither
    ("It is jazz.", ["rock", "pop"], -1),
    ("Not rock.", ["rock", "pop"], -1),  # a rejected option never implies the other
    ("Probably pop.", ["rock", "pop"], -1),  # hedge
    ("It could be either.", ["rock", "pop"], -1),
    ("The first one.", ["rock", "pop"], 0),
    ("The latter.", ["rock", "pop"], 1),
    ("The double bass.", ["flute", "bass"], 1),  # instrument synonyms
    ("J. S. Bach, clearly.", ["mozart", "bach"], 1),  # composer forms
    ("Old-time music.", ["old-time / historic", "rock"], 0),
    ("Something else entirely", ["x-label", "y-label"], -1),
    ("Y-Label.", ["x-label", "y-label"], 1),  # labels outside every lexicon: their own names
    ("", ["rock", "pop"], -1),
])
def test_read_choice(text, options, expected):
    assert read_choice(text, options) == expected


def test_judges_output_and_errors():
    tf = JUDGES.build("true_false")
    assert tf.judge(["Yes.", "No.", "Maybe.", None], [["piano"]] * 4) == [
        {"extracted": ["yes"]}, {"extracted": ["no"]}, {"extracted": []},
        {"extracted": None, "error": "no response"}]
    bc = JUDGES.build("binary_choice")
    out = bc.judge(["Rock.", "Both.", "Rock.", None], [["rock", "pop"], ["rock", "pop"], ["rock"], ["rock", "pop"]])
    assert [o.get("parsed_index") for o in out] == [0, -1, None, None]
    assert "2 options" in out[2]["error"] and out[3]["error"] == "no response"
    with pytest.raises(KeyError):
        JUDGES.build("binary_choice", vocabulary="nope")
    with pytest.raises(ValueError):
        tf.judge(["Yes"], [])


# --------------------------------------------------------------------------- chunks

def _chunk_rows(rid: str, per_chunk: list, **kw) -> list[dict]:
    return [{"request_id": rid, "chunk_index": i, "error": None, "error_stage": None, "text": f"chunk {i}",
             **kw, **({"parsed_index": p} if kw.get("protocol") == "binary_choice" else {"extracted": p})}
            for i, p in enumerate(per_chunk)]


def test_sixty_second_preset_chunks_a_long_clip(tmp_path):
    sr = 8000
    path = tmp_path / "long.wav"
    sf.write(path, np.random.default_rng(0).uniform(-0.5, 0.5, 150 * sr).astype(np.float32), sr)
    unbounded = ModelConfig(name="m", kind="null", chunk_seconds=CHUNK_SECONDS_PAPER)
    assert CHUNK_SECONDS_PAPER == 60.0
    assert chunk_window(unbounded, None) == 60.0 and chunk_window(unbounded, 30.0) == 30.0  # never above the window
    assert chunk_window(ModelConfig(name="m", kind="null"), 30.0) == 30.0
    row = {"audio_uri": str(path), "excerpt_start": None, "excerpt_end": None, "condition": "correct", "error": None}
    pieces = Decoder(sr, chunk_window(unbounded, None)).one(dict(row), {})
    assert [p["chunk_index"] for p in pieces] == [0, 1, 2] and all(p["n_chunks"] == 3 for p in pieces)
    assert [p["audio_seconds"] for p in pieces] == [60.0, 60.0, 30.0]
    with pytest.raises(ValueError):
        ModelConfig(name="m", kind="null", chunk_seconds=0)


def test_long_clip_labels_are_the_union_of_its_chunks():
    rows = _chunk_rows("r", [["piano", "violin"], [], ["cello", "piano"]], protocol="factual", labels=["piano"])
    rows.reverse()  # chunks may arrive in any order
    merged = merge_chunks(rows)
    assert len(merged) == 1 and merged[0]["extracted"] == ["piano", "violin", "cello"]
    assert merged[0]["chunk_extracted"] == [["piano", "violin"], [], ["cello", "piano"]]


@pytest.mark.parametrize("chunks,truth,any_,majority", [
    ([["yes"], ["no"], ["no"]], "yes", 1.0, 0.0),  # heard in one chunk of three
    ([["yes"], ["yes"], ["no"]], "yes", 1.0, 1.0),
    ([["yes"], ["no"]], "no", 1.0, 0.0),  # a tie is no
    ([["yes"], [], []], "yes", 1.0, 1.0),  # unanswered chunks are ignored
    ([[], []], "yes", math.nan, math.nan),  # no chunk answered → unanswered (wrong)
    ([["no"], ["no"], ["no"]], "no", 0.0, 0.0),
])
def test_true_false_aggregates_chunks_by_any_and_majority(chunks, truth, any_, majority):
    merged = merge_chunks(_chunk_rows("r", chunks, protocol="true_false", labels=[truth]))
    (s,) = TrueFalseScorer().score(merged)
    for rule, want in (("any", any_), ("majority", majority)):
        got = s[f"answer_{rule}"]
        assert (math.isnan(got) and math.isnan(want)) or got == want, rule
        assert s[f"correct_{rule}"] == float(not math.isnan(want) and bool(want) == (truth == "yes"))
        assert s[f"answered_{rule}"] == float(not math.isnan(want))
    assert s["n_chunks"] == len(chunks)


def test_binary_choice_chunks_by_majority():
    assert combine_choices([0, 0, 1]) == 0 and combine_choices([1, -1, None]) == 1
    assert combine_choices([0, 1]) == -1 and combine_choices([-1, -1]) == -1 and combine_choices([]) == -1
    pick = lambda rows: [{k: r[k] for k in ("choice", "correct", "answered")} for r in rows]  # noqa: E731
    merged = merge_chunks(_chunk_rows("r", [1, -1, 1], protocol="binary_choice", correct_index=1))
    assert pick(BinaryChoiceScorer().score(merged)) == [{"choice": 1.0, "correct": 1.0, "answered": 1.0}]
    merged = merge_chunks(_chunk_rows("r", [0, 1], protocol="binary_choice", correct_index=1))
    assert pick(BinaryChoiceScorer().score(merged)) == [{"choice": -1.0, "correct": 0.0, "answered": 0.0}]


def test_recording_units():
    assert recording_id("2202:tf:piano") == "2202" and recording_id("2202") == "2202"


# --------------------------------------------------------------------------- items, requests, judging

def _source(n: int = 2) -> list[dict]:
    return [{"item_id": f"s{k}", "protocol": "factual", "task": "instrument",
             "audio_uri": f"/a/{k}.wav", "question": "q", "labels": [["piano", "violin"], ["flute"]][k % 2]}
            for k in range(n)]


def test_derived_items_validate_and_keep_their_option_order():
    vocab = ["piano", "violin", "flute"]
    items = ff.derive_formats(_source(), ["standard", "binary_choice", "true_false"], vocab, seed=1)
    good, bad = validate_items("d", items)
    assert not bad and [i["protocol"] for i in good].count("true_false") == 6
    assert {i["protocol"] for i in good} == {"factual", "binary_choice", "true_false"}
    tf = next(i for i in good if i["item_id"] == "s0:tf:violin")
    assert tf["options"] == ["violin"] and tf["labels"] == ["yes"]
    with pytest.raises(ValueError):
        ff.derive_formats(_source(), ["multiple"], vocab, 0)
    bad_tf = {**{k: v for k, v in tf.items() if k != "dataset"}, "labels": ["maybe"]}
    assert "yes" in validate_items("d", [bad_tf])[1][0]["error"]
    cfg = parse_config({"name": "t", "datasets": [{"name": "d", "kind": "synthetic"}],
                        "models": [{"name": "m", "kind": "null"}],
                        "protocols": [{"name": "binary_choice"}, {"name": "true_false"}]})
    reqs = expand_requests(cfg, good)
    for r in (r for r in reqs if r["protocol"] == "binary_choice"):
        item = next(i for i in good if i["item_id"] == r["item_id"])
        assert r["options"] == item["options"] and r["correct_index"] == item["correct_option"]
        assert r["prompt"] == item["question"]  # "Between A and B, …" names them in this order
    assert all(r["options"] == [r["item_id"].split(":tf:")[1]] for r in reqs if r["protocol"] == "true_false")


def test_lexicon_judge_per_task_and_genre_tree(tmp_path):
    tree = tmp_path / "genres.csv"
    tree.write_text("genre_id,#tracks,parent,title,top_level\n10,1,0,Pop,10\n12,1,0,Rock,12\n15,1,0,Electronic,15\n"
                    "25,1,12,Punk,12\n181,1,15,Techno,15\n")
    judge = JUDGES.build("lexicon", vocabulary="auto", tree=str(tree))
    text = "Techno with punk energy, a pop hook, double bass and a violin; J.S. Bach would approve."
    tasks = ["genre", "genre-tree", "genre-node", "instrument", "composer", "tempo"]
    out = judge.judge([text] * len(tasks), [None] * len(tasks), tasks=tasks)
    assert [o.get("extracted") for o in out] == [
        ["pop"],  # top level: only the 16 top-level names count
        ["electronic", "rock", "pop"],  # same tree: each genre credited as its top-level genre
        ["techno", "punk", "pop"],  # same node: the genres themselves
        ["bass", "violin"], ["bach"], None]
    assert "unknown task 'tempo'" in out[-1]["error"]
    # the pipeline's judge stage passes each row's task to such a judge
    import pyarrow as pa
    from evalcore.pipeline.stages import JUDGED

    rows = [{f.name: None for f in JUDGED} | {"request_id": f"r{i}", "protocol": "factual", "task": t, "text": text,
                                              "model": "m", "condition": "correct", "variant": "v", "dataset": "d",
                                              "item_id": f"i{i}", "option_order": 0}
            for i, t in enumerate(["genre-tree", "composer"])]
    judged = judge_batch(pa.Table.from_pylist(rows, schema=JUDGED),
                         {"factual": ("lexicon", json.dumps({"vocabulary": "auto", "tree": str(tree)}))}).to_pylist()
    assert [r["extracted"] for r in judged] == [["electronic", "rock", "pop"], ["bach"]]


# --------------------------------------------------------------------------- tables of a run (no Ray)

def test_finish_writes_format_rows_and_agreement(tmp_path):
    cfg = parse_config({
        "name": "t", "datasets": [{"name": "d", "kind": "synthetic"}], "models": [{"name": "m", "kind": "null"}],
        "protocols": [{"name": "true_false"}, {"name": "binary_choice"},
                      {"name": "factual", "judge": {"kind": "lexicon", "params": {"vocabulary": "auto"}},
                       "agreement_judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}}],
        "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 200}})
    key = dict(dataset="d", task="instrument", model="m", variant="default", option_order=0)
    judged: list[dict] = []
    for cond in ("correct", "random"):
        for k, (label, truth, chunks) in enumerate([("piano", "yes", [["yes"], ["no"], ["no"]]),
                                                   ("violin", "no", [["no"], ["no"], ["yes"]]),
                                                   ("cello", "yes", [["yes"], ["yes"], []])]):
            judged += _chunk_rows(f"tf-{cond}-{k}", chunks, protocol="true_false", item_id=f"rec:tf:{label}",
                                  condition=cond, labels=[truth], category=label, options=[label], **key)
        judged += _chunk_rows(f"b-{cond}", [0 if cond == "correct" else -1], protocol="binary_choice",
                              item_id="rec:binary", condition=cond, options=["piano", "flute"], correct_index=0, **key)
        for i, (text, found) in enumerate([("a piano and a guitar", ["piano"]), ("violins", ["violin"])]):
            judged.append({**_chunk_rows(f"f-{cond}", [found], protocol="factual", item_id="rec", condition=cond,
                                         labels=["piano", "violin"], **key)[0], "chunk_index": i, "text": text})
    res = finish(cfg, items_in=1, item_errors=[], judged=judged)
    s = pq.read_table(f"{cfg.root}/tables/summary.parquet").to_pandas()
    v = s[(s["kind"] == "value") & (s["condition"] == "correct")].set_index(["protocol", "group", "metric"])["value"]
    # any: piano TP, violin FP, cello TP; majority: piano FN, violin TN, cello TP
    assert v[("true_false", "all", "accuracy_any")] == pytest.approx(2 / 3)
    assert v[("true_false", "all", "precision_any")] == pytest.approx(2 / 3)
    assert v[("true_false", "all", "recall_any")] == 1.0 and v[("true_false", "all", "f1_any")] == pytest.approx(0.8)
    assert v[("true_false", "all", "accuracy_majority")] == pytest.approx(2 / 3)
    assert v[("true_false", "all", "precision_majority")] == 1.0
    assert v[("true_false", "all", "recall_majority")] == 0.5
    assert v[("true_false", "label=piano", "accuracy_any")] == 1.0
    assert v[("true_false", "label=piano", "accuracy_majority")] == 0.0
    assert math.isnan(v[("true_false", "label=violin", "recall_any")])  # never true: undefined, not 0
    assert v[("binary_choice", "all", "accuracy")] == 1.0
    r = s[(s["kind"] == "value") & (s["condition"] == "random")].set_index(["protocol", "metric"])["value"]
    assert r[("binary_choice", "accuracy")] == 0.0 and r[("binary_choice", "answered")] == 0.0
    # agreement: [piano, violin] (judge) vs [piano, guitar, violin] (agreement judge, united over chunks)
    assert v[("factual", "all", "agreement_exact")] == 0.0
    assert v[("factual", "all", "agreement_jaccard")] == pytest.approx(2 / 3)
    assert v[("factual", "all", "agreement_f1")] == pytest.approx(0.8)
    agreement = pq.read_table(f"{cfg.root}/tables/agreement.parquet").to_pandas()
    assert list(agreement.set_index("condition").loc["correct", "agreement_labels"]) == ["piano", "guitar", "violin"]
    assert "## true_false · d" in res.report and "agreement_f1" in res.report
    assert res.counts["requests_in"] == res.counts["requests_scored"] == 10


def test_no_agreement_table_without_agreement_judge(tmp_path):
    cfg = parse_config({"name": "t", "datasets": [{"name": "d", "kind": "synthetic"}],
                        "models": [{"name": "m", "kind": "null"}], "protocols": [{"name": "factual"}],
                        "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 100}})
    rows = _chunk_rows("f", [["guitar"]], protocol="factual", item_id="i", condition="correct", labels=["guitar"],
                       dataset="d", task="instrument", model="m", variant="default", option_order=0)
    finish(cfg, items_in=1, item_errors=[], judged=rows)
    assert not (tmp_path / "run" / "tables" / "agreement.parquet").exists()
