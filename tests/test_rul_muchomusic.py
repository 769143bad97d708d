"""RUL-MuchoMusic: the loader on the released format, the Perceptual Index and leave-one-out vote by hand, the
summary rows, and the fixture end to end through weight-free stand-in models and the scoring.

Fixture: ``tests/fixtures/rul_muchomusic/RUL-MuchoMusic.json``, in the released format of ``RUL-MuchoMusic.json``
(github.com/yongyizang/AreYouReallyListening at d3971de18934a283deb41f472d21b34eb19e10c2) with made-up questions;
its tiny audio (one generated tone per question) lies beside it; MuChoMusic's layout is written here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
import yaml

from evalcore.runconfig.config import parse_config
from evalcore.datasets.rul_muchomusic import RulMuchoMusic
from evalcore.datasets.validate import validate_items
from evalcore.judges.base import JUDGES
from evalcore.models.base import MODELS, AudioPrompt
from evalcore.protocols.prompts import option_order
from evalcore.protocols.requests import expand_requests
from evalcore.reports import markdown
from evalcore.scorers.perceptual_index import perceptual_index, rul_rows, vote
from evalcore.scoring.requests import per_item_table
from evalcore.scoring.summary import summary_table

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "rul_muchomusic" / "RUL-MuchoMusic.json"
AUDIO_DIR = FIXTURE.parent / "audio"  # one file per question, <question id>.mp3, as the released scripts read them
CONFIG = REPO / "configs" / "benchmarks" / "rul-muchomusic.yaml"
RELEASED = json.loads(FIXTURE.read_text())
YTID = "-0Gj8-vB1q4"


def _clip(path: Path, seconds: float = 0.5, fmt: str = "MP3", freq: float = 220.0, sr: int = 16000) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * sr)) / sr
    sf.write(path, (0.2 * np.sin(2 * np.pi * freq * t)).astype(np.float32), sr, format=fmt)


def write_muchomusic(data: Path, *, question_ids: bool = True) -> Path:
    """MuChoMusic's released CSV (questions 305, 17 and 1204 of the fixture, 305 and 1204 on one Song Describer
    track; 2050 absent) and its ``data`` folder with the clips."""
    def row(qid: str, dataset: str, ident: str) -> dict:
        e = RELEASED[qid]
        return {"question_id": int(qid), "question": e["question"], "correct_answer": e["correct_answer"],
                "distractor_1_answer": "x", "distractor_2_answer": "y", "distractor_3_answer": "z",
                "dataset": dataset, "dataset_identifier": ident, "genre": "Folk", "music_knowledge": "[]",
                "music_reasoning": "[]"}
    rows = [row("305", "sdd", "415600.json"), row("17", "musiccaps", f"{YTID}_1.json"), row("1204", "sdd", "415600.json"),
            {**row("305", "sdd", "415600.json"), "question_id": 9, "question": "Unrelated?"}]
    df = pd.DataFrame(rows)
    data.mkdir(parents=True, exist_ok=True)
    (df if question_ids else df.drop(columns="question_id")).to_csv(data / "muchomusic.csv", index=False)
    (data / "sdd").mkdir(exist_ok=True)
    pd.DataFrame({"track_id": [415600], "path": ["00/415600.mp3"]}).to_csv(data / "sdd" / "song_describer.csv",
                                                                          index=False)
    _clip(data / "sdd" / "audio" / "00" / "415600.2min.mp3")
    (data / "musiccaps").mkdir(exist_ok=True)
    pd.DataFrame({"ytid": [YTID], "start_s": [30], "end_s": [40]}).to_csv(data / "musiccaps" / "musiccaps-public.csv",
                                                                        index=False)
    _clip(data / "musiccaps" / "audio" / f"[{YTID}]-[30-40].wav", fmt="WAV")
    return data


# --------------------------------------------------------------------------------------------------- loader


def test_each_clip_gets_the_caption_its_metadata_file_has(tmp_path: Path) -> None:
    """MusicCaps' and Song Describer's metadata files hold captions: both loaders give each item its clip's as the
    item's ``caption`` (the caption condition's description); without a caption column, none."""
    from evalcore.datasets.muchomusic import MuChoMusic

    data = write_muchomusic(tmp_path / "data")
    for name, cols in (("musiccaps/musiccaps-public.csv", {"caption": ["A mellow ballad with strings."]}),
                       ("sdd/song_describer.csv", {"caption": ["Solo acoustic guitar, slow."]})):
        table = pd.read_csv(data / name)
        table.assign(**cols).to_csv(data / name, index=False)
    items = list(MuChoMusic(str(data / "muchomusic.csv"), str(data)).items(None))
    assert [i.get("caption") for i in items] == ["Solo acoustic guitar, slow.", "A mellow ballad with strings.",
                                                 "Solo acoustic guitar, slow.", "Solo acoustic guitar, slow."]
    rul = {json.loads(i["metadata"])["rul_id"]: i for i in RulMuchoMusic(
        str(FIXTURE), muchomusic_csv=str(data / "muchomusic.csv"), audio_root=str(data)).items(None)}
    assert rul["17"]["caption"] == "A mellow ballad with strings." and "caption" not in rul["2050"]
    ok, bad = validate_items("mucho", items)
    assert len(ok) == 4 and all(o["caption"] for o in ok)
    bare = write_muchomusic(tmp_path / "bare")
    assert not any(i.get("caption") for i in MuChoMusic(str(bare / "muchomusic.csv"), str(bare)).items(None))


def test_loader_reads_the_released_file_as_leave_one_out_folds() -> None:
    items = list(RulMuchoMusic(str(FIXTURE), audio_dir=str(AUDIO_DIR)).items(None))
    assert [i["item_id"] for i in items] == [f"{q}-f{k}" for q in RELEASED for k in range(4)]
    fold = {i["item_id"]: i for i in items}["305-f2"]          # distractor 2 ("Banjo") left out
    assert fold["options"] == ["Fiddle", "Tin whistle", "Accordion", "Harmonica"] and fold["correct_option"] == 0
    assert fold["audio_uri"] == str(AUDIO_DIR / "305.mp3")
    assert fold["question"] == "Which instrument carries the main melody?" and fold["task"] == "rul_muchomusic"
    meta = json.loads(fold["metadata"])
    assert meta == {"rul_id": "305", "released_pi": 0.9121, "fold": 2, "excluded_distractor": "Banjo"}
    ok, bad = validate_items("rul", items)
    assert len(ok) == 16 and bad == []


@pytest.mark.parametrize("question_ids", [True, False], ids=["by-question_id", "by-question-text"])
def test_loader_finds_clips_in_muchomusics_released_layout(tmp_path: Path, question_ids: bool) -> None:
    data = write_muchomusic(tmp_path / "data", question_ids=question_ids)
    items = list(RulMuchoMusic(str(FIXTURE), muchomusic_csv=str(data / "muchomusic.csv"),
                               audio_root=str(data)).items(None))
    by_q = {json.loads(i["metadata"])["rul_id"]: i for i in items}
    track = str(data / "sdd" / "audio" / "00" / "415600.2min.mp3")
    assert by_q["305"]["audio_uri"] == by_q["1204"]["audio_uri"] == track        # two questions, one clip
    assert json.loads(by_q["1204"]["metadata"])["audio_id"] == "415600" and by_q["1204"]["category"] == "sdd"
    assert by_q["17"]["audio_uri"] == str(data / "musiccaps" / "audio" / f"[{YTID}]-[30-40].wav")
    assert by_q["2050"]["audio_uri"] is None and "audio_error" in json.loads(by_q["2050"]["metadata"])
    ok, bad = validate_items("rul", items)
    assert len(ok) + len(bad) == len(items) == 16 and len(bad) == 4              # 2050's four folds, not dropped
    assert {b["item_id"] for b in bad} == {f"2050-f{k}" for k in range(4)}


def test_bad_entries_become_error_rows(tmp_path: Path) -> None:
    broken = dict(RELEASED)
    broken["1"] = ["not", "an", "object"]
    broken["2"] = {**RELEASED["17"], "distractors": ["Slow"]}                     # one distractor: no fold
    broken["3"] = {**RELEASED["17"], "distractors": ["Fast and driving", "a", "b", "c"]}  # repeats the answer
    broken["4"] = {k: v for k, v in RELEASED["17"].items() if k != "question"}
    path = tmp_path / "RUL-MuchoMusic.json"
    path.write_text(json.dumps(broken))
    items = list(RulMuchoMusic(str(path), audio_dir=str(tmp_path)).items(None))
    ok, bad = validate_items("rul", items)
    assert len(ok) + len(bad) == len(items)
    reasons = {b["item_id"]: b["error"] for b in bad}
    assert "missing question" in reasons["1"] and "at least 2 options" in reasons["2"]
    assert {k for k in reasons if k.startswith("3-")} == {"3-f1", "3-f2", "3-f3"}  # fold 0 drops the repeat
    assert all("distinct" in reasons[f"3-f{k}"] for k in (1, 2, 3))
    assert {k for k in reasons if k.startswith("4-")} == {f"4-f{k}" for k in range(4)}
    assert len(ok) == 16 + 1


def test_config_mistakes_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^audio_dir: give exactly one"):
        RulMuchoMusic(str(FIXTURE), audio_dir="a", muchomusic_csv="m.csv", audio_root="d")
    with pytest.raises(ValueError, match=r"^audio_dir: give exactly one"):
        RulMuchoMusic(str(FIXTURE))
    with pytest.raises(ValueError, match=r"^audio_root: "):
        RulMuchoMusic(str(FIXTURE), muchomusic_csv="m.csv")
    not_object = tmp_path / "list.json"
    not_object.write_text("[]")
    with pytest.raises(ValueError, match=r"^path: .*JSON object keyed by question id"):
        list(RulMuchoMusic(str(not_object), audio_dir=str(tmp_path)).items(None))


# ------------------------------------------------------------------------------------- Perceptual Index, vote


def test_perceptual_index_hand_example() -> None:
    """The formula, from the released code (``ExampleFilteringBasedOnPI/filter_based_on_PI.py`` at d3971de,
    ``assess_question_hardness``, whose result is stored as ``PI``): for each leave-one-out presentation,
    ``correct_prob = results[correct_letter]["logprob"] / sum_logprobs`` (the correct letter's probability over
    the sum of every option letter's probability; its "logprob" holds ``math.exp`` of the log-probability), the
    four folds averaged, then the repeats averaged, and "Hardness is 1 - probability of answering correctly":
    ``hardness = 1 - avg_correct_prob``. The dataset card: PI "quantif[ies] a question's dependence on perceptual
    understanding using log probability distributions from a text-only language model".

    By hand, four folds (letter probabilities need not sum to 1):
      fold 0: [0.30, 0.10, 0.05, 0.05], correct A → 0.30 / 0.50 = 0.60
      fold 1: [0.10, 0.20, 0.10, 0.10], correct C → 0.10 / 0.50 = 0.20
      fold 2: [0.05, 0.05, 0.05, 0.05], correct D → 0.05 / 0.20 = 0.25
      fold 3: [0.02, 0.08, 0.04, 0.06], correct B → 0.08 / 0.20 = 0.40
      mean 1.45 / 4 = 0.3625 → PI = 1 − 0.3625 = 0.6375
    """
    folds = [([0.30, 0.10, 0.05, 0.05], 0), ([0.10, 0.20, 0.10, 0.10], 2), ([0.05, 0.05, 0.05, 0.05], 3),
             ([0.02, 0.08, 0.04, 0.06], 1)]
    assert perceptual_index(folds) == pytest.approx(0.6375)
    # two repeats of the folds (the released code draws four): the mean of the repeat means is the same
    assert perceptual_index(folds + folds) == pytest.approx(0.6375)
    assert perceptual_index([([1, 1, 1, 1], 0)]) == pytest.approx(0.75)       # a uniform text-only model: chance
    assert perceptual_index([([0.9, 0, 0, 0], 0)]) == 0.0                      # text alone answers it
    for bad in ([], [([0, 0, 0, 0], 0)], [([0.5, 0.5], 2)], [([-0.1, 0.5], 0)]):
        with pytest.raises(ValueError):
            perceptual_index(bad)


def test_leave_one_out_vote() -> None:
    # the released evaluate_leave_one_out: Counter(non-empty answer texts).most_common(1)
    assert vote(["Fiddle", "Banjo", "Fiddle", None]) == "Fiddle"
    assert vote(["Banjo", "Fiddle", None, None]) == "Banjo"                  # a tie: the answer given first
    assert vote([None, None, None, None]) is None


# ------------------------------------------------------------------------------------------- summary rows

CANON = {"q1": ["Fiddle", "Whistle", "Banjo", "Harp"], "q2": ["Fast", "Slow", "Rubato", "Stately"]}
# condition → question → option text chosen per fold (None = parse failure)
CHOICES = {
    "correct": {"q1": ["Fiddle", "Fiddle", "Banjo", "Fiddle"], "q2": ["Slow", None, "Fast", "Rubato"]},
    "text_only": {"q1": ["Whistle", None, None, "Fiddle"], "q2": [None, None, None, None]},
}
PI = {"q1": 0.9, "q2": 0.5}
# By hand:
#   correct:   parse failures q1 0/4, q2 1/4 → 0.125; vote q1 Fiddle ✓, q2 Slow/Fast/Rubato tie → Slow ✗ → 0.5
#   text_only: parse failures q1 2/4, q2 4/4 → 0.75; vote q1 Whistle/Fiddle tie → Whistle ✗, q2 none ✗ → 0
#              folds right: q1 1/4, q2 0/4 → PI = mean(1 − 0.25, 1 − 0) = 0.875; released PI mean(0.9, 0.5) = 0.7


def merged_rows() -> list[dict]:
    rows = []
    for cond, by_q in CHOICES.items():
        for q, picks in by_q.items():
            for k, pick in enumerate(picks):
                options = list(reversed(CANON[q])) if k % 2 else list(CANON[q])   # some presented orders differ
                meta = json.dumps({"rul_id": q, "fold": k, "released_pi": PI[q]})
                rows.append({
                    "request_id": f"{cond}-{q}-{k}", "dataset": "rul", "item_id": f"{q}-f{k}", "protocol": "rul",
                    "protocol_kind": "mcq",
                    "model": "m", "condition": cond, "variant": "rul-muchomusic", "option_order": 0,
                    "task": "rul_muchomusic", "category": None, "difficulty": None, "audio_item_id": f"{q}-f{k}",
                    "text": "…", "options": options, "correct_index": options.index(CANON[q][0]),
                    "parsed_index": -1 if pick is None else options.index(pick), "judge": "mcq_rul@1",
                    "metadata": meta, "error": None,
                })
    return rows


def _value(s: pd.DataFrame, metric: str, condition: str) -> float:
    r = s[(s.metric == metric) & (s.condition == condition) & (s.group == "all") & (s.kind == "value")]
    assert len(r) == 1, (metric, condition, len(r))
    return float(r.iloc[0]["value"])


def test_summary_rows_by_hand() -> None:
    s = summary_table(per_item_table(merged_rows()), resamples=200, confidence=0.95, seed=0).to_pandas()
    assert _value(s, "parse_failure_rate", "correct") == pytest.approx(0.125)
    assert _value(s, "rul_vote_accuracy", "correct") == pytest.approx(0.5)
    assert _value(s, "parse_failure_rate", "text_only") == pytest.approx(0.75)
    assert _value(s, "rul_vote_accuracy", "text_only") == 0.0
    assert _value(s, "perceptual_index", "text_only") == pytest.approx(0.875)
    assert _value(s, "released_perceptual_index", "text_only") == pytest.approx(0.7)
    assert not ((s.metric == "perceptual_index") & (s.condition == "correct")).any()   # text-only only
    assert _value(s, "accuracy", "correct") == pytest.approx(0.5)       # pass level: 3/4 and 1/4 folds right
    rows = s[s.metric.isin(["parse_failure_rate", "perceptual_index"])]
    assert (rows["n"] == 2).all() and rows["definition"].str.contains("resampling questions").all()


def test_no_rul_rows_for_other_items() -> None:
    df = per_item_table([{**r, "task": "muchomusic"} for r in merged_rows()])
    assert rul_rows(df, resamples=10, confidence=0.95, seed=0) == []


# ------------------------------------------------------------------------------------------------ end to end


def _config(tmp_path: Path) -> dict:
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["datasets"][0]["params"] = {"path": str(FIXTURE), "audio_dir": str(AUDIO_DIR)}
    cfg["models"] = [{"name": "text-prior", "kind": "text_prior"}, {"name": "null", "kind": "null"}]
    cfg["stats"]["bootstrap_resamples"] = 200
    return cfg


def test_fixture_end_to_end_through_stand_in_models(tmp_path: Path) -> None:
    raw = _config(tmp_path)
    cfg = parse_config(raw)
    (ds,) = cfg.datasets
    items, bad = validate_items(ds.name, RulMuchoMusic(**ds.params).items(None))
    assert len(items) == 16 and bad == []
    requests = expand_requests(cfg, items)
    assert len(requests) == 16 * 2 * 5 and not any(r["error"] for r in requests)   # items × models × conditions
    judge = JUDGES.get(cfg.protocols[0].judge.kind)()
    merged = []
    for m in cfg.models:
        reqs = [r for r in requests if r["model"] == m.name]
        texts = MODELS.get(m.kind)().generate([AudioPrompt(None, 16000, r["prompt"]) for r in reqs])
        for r, t, j in zip(reqs, texts, judge.judge(texts, [r["options"] for r in reqs])):
            merged.append({**r, "text": t, "judge": "mcq_rul@1", **j})
    s = summary_table(per_item_table(merged), resamples=200, confidence=0.95, seed=0).to_pandas()

    # text-prior always answers "(A)": right exactly where the seeded shuffle put the correct answer first
    first = {i["item_id"]: option_order(4, i["item_id"], 0, cfg.seeds.options)[0] == 0 for i in items}
    per_q = pd.Series(first).groupby(lambda iid: iid.split("-")[0]).mean()
    for cond in ("correct", "noise", "silence", "random", "text_only"):
        tp = s[(s.model == "text-prior") & (s.condition == cond) & (s.group == "all") & (s.kind == "value")]
        assert tp.set_index("metric")["value"]["parse_failure_rate"] == 0.0
        assert tp.set_index("metric")["value"]["accuracy"] == pytest.approx(per_q.mean())
        nul = s[(s.model == "null") & (s.condition == cond) & (s.group == "all") & (s.metric == "parse_failure_rate")]
        assert nul["value"].iloc[0] == 1.0                                          # every failure counted
    pi = s[(s.model == "text-prior") & (s.metric == "perceptual_index")]
    assert list(pi["condition"]) == ["text_only"] and pi["value"].iloc[0] == pytest.approx(1 - per_q.mean())
    released = s[(s.model == "null") & (s.metric == "released_perceptual_index")]["value"].iloc[0]
    assert released == pytest.approx(np.mean([e["PI"] for e in RELEASED.values()]))
    assert _value(s[s.model == "null"], "perceptual_index", "text_only") == 1.0   # no answer: never right

    counts = {"items_in": 16, "items_valid": 16, "items_errored": 0, "requests_in": len(merged),
              "requests_scored": len(merged), "requests_errored": 0}
    report = markdown.render({"name": raw["name"], "confidence": 0.95}, counts, s, pd.DataFrame())
    header = next(line for line in report.splitlines() if line.startswith("| model | variant | condition"))
    for metric in ("accuracy", "parse_failure_rate", "rul_vote_accuracy", "perceptual_index",
                   "released_perceptual_index"):
        assert f" {metric} " in header
        assert f"| rul-muchomusic | {metric} |" in report                          # and its definition
    assert not math.isnan(_value(s[s.model == "text-prior"], "rul_vote_accuracy", "correct"))


def test_validate_names_a_wrong_audio_layout(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evalcore.cli import app

    data = write_muchomusic(tmp_path / "data")
    cfg = _config(tmp_path)
    cfg["datasets"][0]["params"].update(muchomusic_csv=str(data / "muchomusic.csv"), audio_root=str(data))
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 2
    assert [ln.strip() for ln in res.stderr.splitlines() if ln.strip()][1].startswith(
        "datasets.0.params.audio_dir: give exactly one of audio_dir")


# The benchmark config's run on Ray (the shipped protocol over this fixture in MuChoMusic's released layout, by the
# null model and the text prior) is part of the music card's one run: tests/test_benchmark_configs.py
# (test_rul_muchomusic_config_runs_in_the_card).


def test_summary_vote_matches_the_vote_function_on_seeded_answers() -> None:
    rng = np.random.default_rng(7)
    rows = []
    for q in range(40):
        canon = [f"right {q}", *(f"wrong {q}.{j}" for j in range(4))]
        for k in range(4):
            opts = [canon[0], *(d for j, d in enumerate(canon[1:]) if j != k)]
            rows.append({"item_id": f"{q}-f{k}", "protocol": "rul", "dataset": "d", "model": "m", "variant": "v",
                         "condition": "correct", "option_order": 0, "task": "rul_muchomusic", "options": opts,
                         "correct_index": 0, "parsed_index": int(rng.integers(-1, 4)),
                         "metadata": json.dumps({"rul_id": str(q), "fold": k, "released_pi": 0.5})})
    df = pd.DataFrame(rows)
    (vote_row,) = [r for r in rul_rows(df, resamples=10, confidence=0.95, seed=0) if r["metric"] == "rul_vote_accuracy"]
    expected = np.mean([vote([g.options[p] if p >= 0 else None for g, p in zip(qdf.itertuples(), qdf.parsed_index)])
                        == f"right {q}" for q, qdf in df.groupby(df["item_id"].str.split("-").str[0].astype(int))])
    assert vote_row["value"] == pytest.approx(expected) and vote_row["n"] == 40
