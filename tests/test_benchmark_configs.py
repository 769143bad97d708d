"""The configs of ``configs/benchmarks`` (MMAU, MMAR, MMAU-Pro, music subsets) validate, have every listening
control on, and run end to end from their fixtures in the released formats (tests/fixtures/mmau, mmar, mmau_pro)
in one Ray run: the configs' datasets, protocols, conditions, orders, prompts and judges kept; the Music LM
replaced by a weight-free stand-in answering one fixed choice text (``simulated_gpu``), the two weight-free
baselines kept, MMAU-Pro's NV-Embed-v2 judge swapped for its bag-of-words stand-in (no weights offline).
Accuracy and the instruction-following rate (IFR: the share of responses the published rule maps to a choice,
i.e. one minus the parse-failure rate) come out for every model × condition."""

from __future__ import annotations

import copy
import pathlib

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = pathlib.Path(__file__).parent / "fixtures"
CONFIGS = sorted((REPO / "configs" / "benchmarks").glob("*.yaml"))
CONTROLS = {"correct", "random", "silence", "noise", "text_only"}
#: per config: the fixture files, and the choice text the stand-in answers (the right one for exactly one item)
FIXTURE = {
    "mmau-music": ({"path": FIXTURES / "mmau" / "mmau-test-mini.json", "audio_root": FIXTURES / "mmau"}, "Piano"),
    "mmar-music": ({"path": FIXTURES / "mmar" / "MMAR-meta.jsonl", "audio_root": FIXTURES / "mmar"},
                   "Pentatonic scale"),
    "mmau-pro-music": ({"path": FIXTURES / "mmau_pro" / "test.parquet", "audio_root": FIXTURES / "mmau_pro"},
                       "Double bass"),
}


#: configs whose end-to-end run lives in their own test file (RUListening's folds and one order per fold)
OWN_RUN = {"rul-muchomusic": "tests/test_rul_muchomusic.py"}


def test_a_config_per_benchmark() -> None:
    assert {p.stem for p in CONFIGS} == set(FIXTURE) | set(OWN_RUN)
    for test_file in OWN_RUN.values():
        assert (REPO / test_file).exists()


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_config_validates_with_every_listening_control(path: pathlib.Path) -> None:
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == 0, res.output
    cfg = yaml.safe_load(path.read_text())
    for p in cfg["protocols"]:
        assert set(p["conditions"]) == CONTROLS
        assert p["kind"] == "mcq" and p["judge"]["kind"].startswith("mcq_")


# --------------------------------------------------------------------------- end to end on the fixtures


def _localize(stem: str, cfg: dict, out: pathlib.Path) -> dict:
    cfg = copy.deepcopy(cfg)
    files, answer = FIXTURE[stem]
    for d in cfg["datasets"]:
        d["params"] = {**d["params"], **{k: str(v) for k, v in files.items()}}
    models = []
    for m in cfg["models"]:
        if m["kind"] in ("dsp_listener", "text_prior"):
            models.append({**m, "resources": {"num_cpus": 0.1, "batch_size": 32}})
        else:  # the Music LM → a weight-free stand-in of the same name answering one choice text
            models.append({"name": m["name"], "kind": "simulated_gpu",
                           "params": {"seconds_per_batch": 0, "answer": answer},
                           "resources": {"num_cpus": 0.1, "batch_size": 32}})
    cfg["models"] = models
    for p in cfg["protocols"]:
        if p["judge"]["kind"] == "mcq_mmau_pro":
            p["judge"] = {"kind": "mcq_mmau_pro", "params": {"embedder": "bag-of-words"}}
        p["option_orders"] = 2  # the configs' 3 seeded orders, cut to 2 to keep the run small
    cfg["storage"] = {"root": str(out / "run")}
    cfg["stats"] = {**cfg["stats"], "bootstrap_resamples": 100}
    cfg["ray"] = {"progress_bars": False, "decode_num_cpus": 0.5}
    return cfg


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory, local_ray):
    """The three configs, localized, in one run (their seeds and stats agree; only names change)."""
    from evalcore.config import parse_config
    from evalcore.pipeline.run import run
    from paper_fixtures import merge

    tmp = tmp_path_factory.mktemp("bench")
    configs = {p.stem: _localize(p.stem, yaml.safe_load(p.read_text()), tmp) for p in CONFIGS if p.stem in FIXTURE}
    merged, renamed = merge(configs, name="benchmark-configs")
    cfg = parse_config(merged)
    result = run(cfg)
    tables = {n: pq.read_table(f"{cfg.root}/tables/{n}.parquet").to_pandas() for n in ("summary", "per_item", "errors")}
    return {"result": result, "renamed": renamed, **tables}


def _cell(run: dict, protocol: str, model: str, condition: str, metric: str) -> float:
    s = run["summary"]
    s = s[(s.protocol == protocol) & (s.model == model) & (s.condition == condition) & (s.metric == metric)
          & (s.group == "all")]
    assert len(s) == 1, (protocol, model, condition, metric)
    return float(s.iloc[0]["value"])


# per config: (valid items, item error reasons, the stand-in's accuracy and IFR with the clip)
EXPECTED = {
    "mmau-music": (3, ["options must be distinct"], 1 / 3, 1 / 3),
    "mmar-music": (4, [], 1 / 4, 1 / 4),
    # bag-of-words: "Double bass" shares no word with the other two items' choices, a tie: unanswered
    "mmau-pro-music": (3, ["2 audio clips"], 1 / 3, 1 / 3),
}


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(FIXTURE))
def test_benchmark_runs_end_to_end(bench_run: dict, stem: str) -> None:
    c = bench_run["result"].counts
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    (protocol,) = bench_run["renamed"][stem].values()
    n_items, item_errors, acc, ifr = EXPECTED[stem]
    per_item = bench_run["per_item"][bench_run["per_item"]["protocol"] == protocol]
    assert per_item["item_id"].nunique() == n_items
    assert set(per_item["condition"]) == CONTROLS
    assert set(per_item["option_order"]) == {0, 1}
    # the stand-ins answer differently per config, so the run names each config's own "<config>.<model>"
    models = {m.rsplit(".", 1)[-1]: m for m in per_item["model"].unique()}
    assert set(models) == {"qwen2-audio-7b-instruct", "listener", "text-prior"}
    errors = bench_run["errors"]
    config = yaml.safe_load((REPO / "configs" / "benchmarks" / f"{stem}.yaml").read_text())
    (dataset,) = [d["name"] for d in config["datasets"]]
    mine = errors[errors["dataset"] == f"{stem}.{dataset}"]
    assert len(mine[mine["error_stage"] == "load"]) == len(item_errors)
    assert [r for r in item_errors if not mine["error"].str.contains(r).any()] == []
    for model in models.values():
        for cond in sorted(CONTROLS):
            for metric in ("accuracy", "ifr", "errored"):
                _cell(bench_run, protocol, model, cond, metric)  # one value per model × condition
    stand_in = models["qwen2-audio-7b-instruct"]
    for cond in sorted(CONTROLS):  # one fixed answer whatever it hears: the same under every control
        assert _cell(bench_run, protocol, stand_in, cond, "accuracy") == pytest.approx(acc)
        assert _cell(bench_run, protocol, stand_in, cond, "ifr") == pytest.approx(ifr)
    # the parse-failure rate per model × condition is in the report's table of the protocol (as IFR = 1 − it)
    section = bench_run["result"].report.split(f"## {protocol} · ", 1)[1].split("\n## ", 1)[0]
    assert "| model | variant | condition | n | accuracy | ifr |" in section
    if stem != "mmau-pro-music":
        # the listener answers a letter ("The correct answer is (B).") — a bare letter matches nothing under the
        # word-set rule; the text prior answers the first option's text, as the prompt asks, which the rule reads
        assert _cell(bench_run, protocol, models["listener"], "correct", "ifr") == 0.0
        assert _cell(bench_run, protocol, models["text-prior"], "correct", "ifr") > 0.0
