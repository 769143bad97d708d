"""The trackers' parts without a run: the ``tracking:`` block and ``--track`` flags, a checkpoint's training step,
headline keys, warnings that carry no credentials, a nightly's checkpoint runs without trackers, and MLflow's batch
limits met on a real sqlite store with a hand-made finished run of 1,500 headline cells (2,500 metrics)."""

from __future__ import annotations

import json
import logging
import sys

import pandas as pd
import pytest
import yaml

from evalcore.runconfig.config import ConfigError, parse_config
from evalcore.nightly.config import parse_nightly, run_config_dict
from evalcore.tracking import steps
from evalcore.tracking.record import FinishedRun, cell_key, headline
from evalcore.tracking.sinks import scrub, track_run
from evalcore.core.tracking_config import MlflowSink, TrackFlagError, uri_problem, with_track_flags
from conftest import REPO

SMALL = yaml.safe_load((REPO / "configs" / "small.yaml").read_text())


def _cfg(tracking) -> dict:
    return {**SMALL, "tracking": tracking}


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as e:
        parse_config(data)
    return str(e.value)


def test_the_tracking_block_names_each_mistake_in_one_line() -> None:
    cfg = parse_config(_cfg([{"kind": "mlflow"}, {"kind": "wandb", "project": "p", "mode": "offline"},
                             {"kind": "lm_eval"}]))
    assert [s.kind for s in cfg.tracking] == ["mlflow", "wandb", "lm_eval"]
    assert parse_config(SMALL).tracking == []
    assert "tracking: item 0: unknown sink 'neptune'; known: mlflow, wandb, lm_eval" in _error(_cfg([{"kind": "neptune"}]))
    line = _error(_cfg([{"kind": "mlflow", "uri": "https://alice:s3cret@mlflow.example.org"}]))
    assert "tracking.0.mlflow.uri: carries credentials" in line and "MLFLOW_TRACKING_TOKEN" in line
    assert "s3cret" not in line
    assert "cannot be parsed as a URI" in _error(_cfg([{"kind": "mlflow", "uri": "http://[::1"}]))
    assert "cannot be parsed as a URI" in _error(_cfg([{"kind": "mlflow", "uri": "http://host:port/"}]))
    assert "unknown scheme 'ftp'" in _error(_cfg([{"kind": "mlflow", "uri": "ftp://host/x"}]))
    assert "names no database file" in _error(_cfg([{"kind": "mlflow", "uri": "sqlite://"}]))
    assert "tracking.0.wandb.mode" in _error(_cfg([{"kind": "wandb", "mode": "sometimes"}]))
    for ok in ("sqlite:///mlflow.db", "sqlite:////tmp/x/mlflow.db", "http://127.0.0.1:5000", "file:///tmp/mlruns",
               "databricks", "./mlruns", "postgresql+psycopg2://db.example.org/mlflow"):
        assert uri_problem(ok) is None, ok


def test_track_flags_add_or_replace_a_sink_and_refuse_mistakes() -> None:
    cfg = parse_config(_cfg([{"kind": "mlflow", "experiment": "kept"}, {"kind": "lm_eval"}]))
    got = with_track_flags(cfg, ["mlflow=sqlite:///x.db", "wandb=proj"])
    assert [(s.kind, getattr(s, "uri", None) or getattr(s, "project", None)) for s in got.tracking] == [
        ("lm_eval", None), ("mlflow", "sqlite:///x.db"), ("wandb", "proj")]
    assert with_track_flags(cfg, None) is cfg
    with pytest.raises(TrackFlagError, match="--track: unknown sink 'mlfow'"):
        with_track_flags(cfg, ["mlfow"])
    with pytest.raises(TrackFlagError, match="--track: mlflow.uri: carries credentials"):
        with_track_flags(cfg, ["mlflow=https://u:p@h"])


def test_a_nightlys_checkpoint_runs_carry_no_trackers_and_the_step_pattern_is_checked(tmp_path) -> None:
    data = yaml.safe_load((REPO / "evalcore" / "configs" / "nightly_demo.yaml").read_text())
    data["series"][0]["prefix"] = str(tmp_path)
    data["tracking"] = [{"kind": "mlflow"}]
    cfg = parse_nightly(data)
    assert cfg.tracking and "tracking" not in run_config_dict(cfg, cfg.series[0], "step-1", str(tmp_path), "r")
    data["series"][0]["step_pattern"] = "step-\\d+"
    with pytest.raises(ConfigError, match="step_pattern: .*needs a group"):
        parse_nightly(data)
    data["series"][0]["step_pattern"] = "step-(\\d+"
    with pytest.raises(ConfigError, match="step_pattern: .*not a regular expression"):
        parse_nightly(data)


def test_the_training_step_comes_from_trainer_state_json_else_the_name(tmp_path) -> None:
    assert steps.from_name("step-1500") == 1500 and steps.from_name("checkpoint-500") == 500
    assert steps.from_name("run3-epoch2-step1200") == 1200 and steps.from_name("final") is None
    assert steps.from_name("ep2-it300", r"ep(\d+)") == 2
    ck = tmp_path / "checkpoint-500"
    ck.mkdir()
    assert steps.training_step(str(ck), ck.name) == 500
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": 512, "epoch": 1.0}))  # what HF Trainer saves
    assert steps.training_step(str(ck), ck.name) == 512
    (ck / "trainer_state.json").write_text("{not json")
    assert steps.training_step(str(ck), ck.name) == 500
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": "many"}))
    assert steps.training_step(str(ck), ck.name) == 500


def test_keys_keep_to_what_trackers_accept_and_a_difference_brings_its_ci() -> None:
    assert cell_key("mcq", "synth", "default", "correct-random", "accuracy") == "mcq/synth/correct-random/accuracy"
    assert cell_key("mcq", "mucho", "default-icl3", "correct", "accuracy") == "mcq/mucho/default-icl3/correct/accuracy"
    assert cell_key("free", "d", "my variant (v2)", "correct", "bleu") == "free/d/my variant _v2_/correct/bleu"
    summary = pd.DataFrame([
        {"model": "m", "group": "all", "protocol": "mcq", "dataset": "d", "variant": "default", "condition": "correct",
         "kind": "value", "metric": "accuracy", "value": 0.8, "ci_low": 0.7, "ci_high": 0.9},
        {"model": "m", "group": "all", "protocol": "mcq", "dataset": "d", "variant": "default",
         "condition": "correct-random", "kind": "paired_diff", "metric": "accuracy", "value": 0.3, "ci_low": 0.2,
         "ci_high": 0.4},
        {"model": "m", "group": "task=tempo", "protocol": "mcq", "dataset": "d", "variant": "default",
         "condition": "correct", "kind": "value", "metric": "accuracy", "value": 1.0, "ci_low": 1.0, "ci_high": 1.0},
        {"model": "other", "group": "all", "protocol": "mcq", "dataset": "d", "variant": "default",
         "condition": "correct", "kind": "value", "metric": "accuracy", "value": 0.1, "ci_low": 0.0, "ci_high": 0.2}])
    cells = headline(summary, "m")
    assert dict(zip(cells["key"], cells["value"])) == {
        "mcq/d/correct/accuracy": 0.8, "mcq/d/correct-random/accuracy": 0.3,
        "mcq/d/correct-random/accuracy_ci_low": 0.2, "mcq/d/correct-random/accuracy_ci_high": 0.4}


def test_a_warning_carries_no_credentials(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-ABCDEF123")
    text = scrub("API request to https://bob:hunter2@mlflow.example.org:5000/api/2.0/mlflow/runs/create?x=1 failed; "
                 "header Authorization: Bearer tok-ABCDEF123")
    assert "hunter2" not in text and "bob" not in text and "tok-ABCDEF123" not in text
    assert "https://mlflow.example.org:5000" in text and "/api/2.0" not in text


def test_evalcore_track_says_each_result_once(tmp_path, caplog) -> None:
    """``evalcore track`` prints one stdout line per sink and model; the sinks' log line of the same result is left
    out there (it printed each result twice: that line on stderr, then the same on stdout)."""
    from typer.testing import CliRunner

    from evalcore.cli import app
    from tracking_helpers import handmade_run

    handmade_run(tmp_path / "run", 20)
    with caplog.at_level(logging.INFO, logger="evalcore"):
        res = CliRunner().invoke(app, ["track", str(tmp_path / "run"), "--track", f"lm_eval={tmp_path / 'lm'}"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [f"lm_eval: m: 1 task(s) → {tmp_path / 'lm' / 'm'}"]
    assert not [r for r in caplog.records if "lm_eval" in r.getMessage()]
    assert not logging.getLogger("evalcore").filters  # the command's filter is gone with it


def test_mlflow_logs_thousands_of_cells_in_batches_within_its_limits(tmp_path, caplog) -> None:
    pytest.importorskip("mlflow")
    from tracking_helpers import fresh_mlflow_uri, handmade_run, mlflow_runs

    handmade_run(tmp_path / "run", 1500)  # 1,500 cells + 1,000 CI bounds: three batches of metrics
    uri = fresh_mlflow_uri(tmp_path / "store")
    with caplog.at_level(logging.INFO, logger="evalcore"):
        (done,) = track_run([MlflowSink(kind="mlflow", uri=uri)], str(tmp_path / "run"))
    assert done.ok and "2500 metrics" in done.said, done
    (r,) = mlflow_runs(uri, "handmade")
    assert len(r.data.metrics) == 2500 and r.data.params["checkpoint.sha256"] == "ab"
    assert r.data.metrics["mcq/d0/correct-random/metric0_ci_high"] == pytest.approx(2 / 1500 + 0.01)
    assert FinishedRun(str(tmp_path / "run")).models == ["m"]
    assert not [x for x in caplog.records if x.levelno >= logging.WARNING]


def test_validate_names_a_sink_whose_package_is_missing_with_its_install_command(tmp_path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from evalcore.cli import app

    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(_cfg([{"kind": "lm_eval"}, {"kind": "wandb", "mode": "offline"}])))
    monkeypatch.setitem(sys.modules, "wandb", None)  # W&B not installed
    res = CliRunner().invoke(app, ["validate", str(path)])
    assert res.exit_code == 2, res.output
    from evalcore.core.packages import install

    hint = install("tracking")  # absolute: it runs from any directory (a relative ".[tracking]" fails outside the clone)
    assert f"{sys.executable} -m pip install -e {REPO}[tracking]" == hint.replace("'", "")
    assert f"tracking.1.kind: the wandb sink needs wandb, which does not import here; install: {hint}" in res.stderr
    assert CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)]).exit_code == 0
    path.write_text(yaml.safe_dump(_cfg([{"kind": "mlflow", "uri": "http://[::1"}])))
    res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(path)])
    assert res.exit_code == 2 and "tracking.0.mlflow.uri: cannot be parsed as a URI" in res.stderr


def test_lm_eval_samples_carry_the_options_as_each_request_presented_them(tmp_path) -> None:
    """A multiple-choice sample's ``doc`` and ``arg_0`` hold the options in the order that request showed them (its
    option order), with the right one's index among them — not the bare question (the samples kept only that)."""
    import pandas as pd

    from evalcore.tracking.lm_eval_files import samples
    from tracking_helpers import handmade_run

    handmade_run(tmp_path / "run", 3)
    canonical = ["violin", "piano", "drums"]
    rows = [{"request_id": f"r{k}", "dataset": "d0", "item_id": "i1", "protocol": "mcq", "model": "m",
             "condition": "correct", "variant": "default", "option_order": k, "text": "(A)", "correct": 1.0,
             "options": shown, "correct_index": shown.index("piano")}
            for k, shown in enumerate((canonical, ["drums", "piano", "violin"]))]
    pd.DataFrame(rows).to_parquet(tmp_path / "run" / "tables" / "per_item.parquet", index=False)
    lines = samples(FinishedRun(str(tmp_path / "run")), "m")["mcq_d0"]
    assert [x["doc"]["options"] for x in lines] == [canonical, ["drums", "piano", "violin"]]
    assert [x["doc"]["correct_option"] for x in lines] == [1, 1] and [x["target"] for x in lines] == ["piano"] * 2
    assert lines[1]["arguments"]["gen_args_0"]["arg_0"] == "q?\n(A) drums\n(B) piano\n(C) violin"
    assert lines[0]["doc"]["question"] == "q?" and lines[0]["prompt_hash"] != lines[1]["prompt_hash"]
