"""A factual protocol without a judge extracts its tasks' labels (genres for a genre task, not instruments), and
a configured vocabulary that cannot fit the task is a config error of the preflight (before any model runs), one
line naming the field."""

from __future__ import annotations

import pytest

from evalcore.runconfig import preflight
from evalcore.runconfig.config import ConfigError, parse_config
from evalcore.datasets.base import DatasetContext
from evalcore.datasets.fma import FMA
from evalcore.datasets.validate import validate_items
from evalcore.judges.lexicon import LexiconJudge
from evalcore.pipeline.run import protocol_judges
from evalcore.pipeline.stages import judge_batch
from evalcore.protocols import expand_requests
from evalcore.scoring.requests import merge_chunks, per_item_table
from evalcore.scoring.summary import summary_table
from evalcore.core.schema import RESPONSE, conform
from test_fma_musicnet import GENRES_CSV, TRACKS_CSV


def _config(tmp_path, protocol: dict, task: str = "genre", extra_datasets: tuple = ()) -> object:
    (tmp_path / "tracks.csv").write_text(TRACKS_CSV)
    (tmp_path / "genres.csv").write_text(GENRES_CSV)
    fma = {"name": "fma", "kind": "fma", "params": {"tracks": str(tmp_path / "tracks.csv"), "task": task,
                                                     "genres": str(tmp_path / "genres.csv"), "audio_root": "/a"}}
    return parse_config({"name": "t", "datasets": [fma, *extra_datasets], "models": [{"name": "m", "kind": "null"}],
                         "protocols": [{"name": "factual", "conditions": ["correct"], **protocol}]})


# an answer naming a genre and instruments: the instrument lexicon would find piano and guitar, not the genre
ANSWERS = {"000002": "Hip hop with a piano loop.", "000010": "Pop, with guitar and piano.",
           "000140": "A folk song on acoustic guitar.", "001482": "Rock, I think, with a piano.",
           "000005": "Techno with a piano.", "123456": "Punk rock: loud guitars."}


def _scored(cfg, tmp_path, task: str = "genre"):
    rows = list(FMA(**cfg.datasets[0].params).items(DatasetContext("fma", str(tmp_path / "run"), 0)))
    items, _ = validate_items("fma", rows)
    reqs = expand_requests(cfg, items)
    responses = [{**r, "chunk_index": 0, "n_chunks": 1, "text": ANSWERS[r["item_id"]]} for r in reqs]
    judged = judge_batch(conform(responses, RESPONSE), protocol_judges(cfg)).to_pylist()
    return judged, summary_table(per_item_table(merge_chunks(judged)), resamples=100, confidence=0.95,
                                 seed=0).to_pandas()


def test_a_genre_protocol_without_a_judge_scores_genres(tmp_path) -> None:
    cfg = _config(tmp_path, {})
    kind, params = protocol_judges(cfg)["factual"]
    assert kind == "lexicon" and '"genre": "genre"' in params and "genres.csv" in params
    judged, summary = _scored(cfg, tmp_path)
    got = {r["item_id"]: r["extracted"] for r in judged}
    assert got == {"000002": ["hip-hop"], "000010": ["pop"], "000140": ["folk"], "001482": ["rock"],
                   "000005": [], "123456": ["rock"]}  # no piano, no guitar
    f1 = summary[(summary.metric == "f1_micro") & (summary.condition == "correct")].value.iloc[0]
    assert f1 == pytest.approx(2 * 4 / (2 * 4 + 1 + 2))  # TP 4 (002, 010, 140, 123456), FP 1 (rock), FN 2


def test_genre_tree_task_without_a_judge_gets_the_tree(tmp_path) -> None:
    cfg = _config(tmp_path, {}, task="genre-tree")
    judged, _ = _scored(cfg, tmp_path)
    got = {r["item_id"]: r["extracted"] for r in judged}
    assert got["000005"] == ["electronic"] and got["123456"] == ["rock"]  # techno / punk credited at the top


@pytest.mark.parametrize("protocol,field", [
    ({"judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}}, "protocols.0.judge.params.vocabulary"),
    ({"judge": {"kind": "llm_extractor", "params": {"vocabulary": "composer", "base_url": "http://x/v1",
                                                    "model": "m", "rpm": 60, "tpm": 10_000}}}, "protocols.0.judge.params.vocabulary"),
    ({"vocabulary": ["piano", "violin"]}, "protocols.0.vocabulary"),
])
def test_a_vocabulary_that_cannot_fit_the_task_is_a_config_error(tmp_path, protocol, field) -> None:
    cfg = _config(tmp_path, protocol)  # the config parses: the fit needs the datasets' declared tasks
    with pytest.raises(ConfigError) as e:
        preflight.check(cfg, check_paths=False)
    lines = str(e.value).splitlines()[1:]
    assert len(lines) == 1 and lines[0].strip().startswith(f"{field}: cannot fit task 'genre' of dataset 'fma'")


@pytest.mark.parametrize("protocol", [
    {"judge": {"kind": "lexicon", "params": {"vocabulary": "genre"}}},
    {"judge": {"kind": "lexicon", "params": {"vocabulary": "auto"}}},
    {"vocabulary": ["rock", "pop", "polka"]},
    {"judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}, "datasets": ["mine"]},  # not the fma one
    # an agreement judge never scores: comparing another vocabulary with the judge's is its use
    {"agreement_judge": {"kind": "lexicon", "params": {"vocabulary": "musicnet_instrument"}}},
])
def test_vocabularies_that_fit(tmp_path, protocol) -> None:
    mine = {"name": "mine", "kind": "items_file", "params": {"path": "items.jsonl"}}  # declares no task: unchecked
    assert preflight.vocabulary_problems(_config(tmp_path, protocol, extra_datasets=(mine,))) == []


def test_rows_without_a_task_keep_the_former_default() -> None:
    judge = LexiconJudge(vocabulary="auto", tasks={"genre": "genre"}, fallback="instrument")
    out = judge.judge(["Rock with a piano.", "Rock with a piano."], [None, None], tasks=["genre", None])
    assert [r["extracted"] for r in out] == [["rock"], ["piano"]]
    assert LexiconJudge(vocabulary="auto").judge(["x"], [None], tasks=[None])[0]["error"].startswith("lexicon:")


def test_a_nightly_suite_whose_vocabulary_cannot_fit_is_rejected_when_parsed(tmp_path) -> None:
    """The nightly parses each series as a run config and asks the preflight's config checks (no file read)."""
    import yaml

    from evalcore.nightly.config import parse_nightly
    from evalcore.nightly.demo import demo_config_path

    data = yaml.safe_load(demo_config_path().read_text())
    data["series"][0]["prefix"] = str(tmp_path / "ck")
    parse_nightly(data)
    data["protocols"][0]["judge"]["params"]["vocabulary"] = "genre"  # the synthetic demo's task is instrument
    data["protocols"][1]["templates"] = "nope"
    with pytest.raises(ConfigError) as e:
        parse_nightly(data)
    lines = [x.strip() for x in str(e.value).splitlines()[1:]]
    assert lines[0].startswith("protocols.0.judge.params.vocabulary: cannot fit task 'instrument' of dataset 'synth'")
    assert lines[1].startswith("protocols.1.templates: unknown template set 'nope'") and len(lines) == 2
