"""The trackers on the session's finished demo run (``demo_run``): the run's tracking stage
(:func:`evalcore.tracking.sinks.track_run`, what ``evalcore.pipeline.run.run`` calls last) sends it to a local MLflow
sqlite store, an offline W&B run and lm-eval's files; each is read back with its own tooling: MLflow's client,
``wandb leet inspect --summary --json``, and lm-eval's file-name rules and field names (lm-eval's own helpers when
it imports here). Then ``evalcore track`` replays it (nothing added), a tracker that cannot be reached and a W&B that
is not installed are one warning each with the run's files untouched, and no secret from the environment is
written anywhere.

The demo run is the session's ``demo_run`` (tests/conftest.py); this module adds no run of its own. A real
``evalcore run`` with sinks in its config is tests/test_cli_help.py's ``finished`` run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.tracking.sinks import track_run
from evalcore.core.tracking_config import LmEvalSink, MlflowSink, WandbSink
from tracking_helpers import expected_cells, fresh_mlflow_uri, mlflow_runs, same

mlflow = pytest.importorskip("mlflow")
wandb = pytest.importorskip("wandb")

SECRETS = {"MLFLOW_TRACKING_TOKEN": "mlflow-SECRET-7f3a9c", "WANDB_API_KEY": "wandb-SECRET-0123456789abcdef0123456789"
           "abcdef01234567"}


@pytest.fixture(scope="module")
def logged(demo_run, tmp_path_factory):
    """The demo run logged once to all three sinks, with tokens in the environment that must never be written."""
    cfg, _ = demo_run
    tmp = tmp_path_factory.mktemp("tracked")
    uri = fresh_mlflow_uri(tmp / "mlflow")
    sinks = [MlflowSink(kind="mlflow", uri=uri),  # experiment: the suite's name, "demo"
             WandbSink(kind="wandb", project="evalcore-demo", mode="offline", dir=str(tmp / "wb")),
             LmEvalSink(kind="lm_eval", out=str(tmp / "lm_eval"))]
    (tmp / "wb").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for k, v in SECRETS.items():
            mp.setenv(k, v)
        done = track_run(sinks, cfg.root)
    assert all(x.ok for x in done), done
    return cfg, tmp, uri, done


def _summary(cfg) -> pd.DataFrame:
    return pd.read_parquet(Path(cfg.root) / "tables" / "summary.parquet")


def test_mlflow_holds_every_headline_cell_the_params_and_the_artifacts(logged) -> None:
    from mlflow import MlflowClient

    cfg, tmp, uri, _ = logged
    summary, client = _summary(cfg), MlflowClient(tracking_uri=uri)
    runs = {r.data.tags["evalcore.model"]: r for r in mlflow_runs(uri, "demo")}
    assert set(runs) == {"listener", "text-prior"}  # one MLflow run per model
    for model, r in runs.items():
        want = expected_cells(summary, model)
        assert len(want) > 150 and set(r.data.metrics) == set(want)
        bad = [k for k, v in want.items() if not same(float(v), r.data.metrics[k])]
        assert not bad, bad[:5]
        assert r.info.status == "FINISHED" and r.info.run_name == model
        p = r.data.params
        assert p["evalcore.version"] and len(p["config.hash"]) == 16 and p["model.kind"] in ("dsp_listener", "text_prior")
        assert {f"seeds.{s}" for s in ("derangement", "noise", "options", "icl", "bootstrap")} <= set(p)
        assert p["checkpoint.checkpoint"] in ("dsp-listener-v1", "text-prior-v1")
        assert p["judge.mcq"].startswith("mcq_string@") and p["judge.factual"].startswith("lexicon@")
        assert p["prompt.mcq"] == "default" and len(p["dataset.synth"]) == 16
        assert p["definition.accuracy"] == summary.loc[summary["metric"] == "accuracy", "definition"].iloc[0]
        t = r.data.tags
        assert len(t["evalcore.suite_fingerprint"]) == 16 and t["evalcore.checkpoint"] in p["checkpoint.checkpoint"]
        assert t["evalcore.listens"] == {"listener": "yes", "text-prior": "no"}[model]
        assert "listens" in t["mlflow.note.content"]
        arts = {a.path for a in client.list_artifacts(r.info.run_id)}
        assert arts == {"report.html", "summary.parquet", "per_item.parquet"}
        local = Path(client.download_artifacts(r.info.run_id, "summary.parquet", str(tmp / f"dl-{model}")))
        assert local.read_bytes() == (Path(cfg.root) / "tables" / "summary.parquet").read_bytes()
        items = pd.read_parquet(client.download_artifacts(r.info.run_id, "per_item.parquet", str(tmp / f"pi-{model}")))
        assert set(items["model"]) == {model} and len(items) == int((pd.read_parquet(
            Path(cfg.root) / "tables" / "per_item.parquet")["model"] == model).sum())
        key = "mcq/synth/correct-random/accuracy"  # one point, at step 0 (a run outside the nightly)
        assert [h.step for h in client.get_metric_history(r.info.run_id, key)] == [0]


def test_wandb_offline_run_reads_back_with_wandbs_own_tool(logged) -> None:
    cfg, tmp, _, done = logged
    summary = _summary(cfg)
    dirs = sorted((tmp / "wb" / "wandb").glob("offline-run-*"))
    assert len(dirs) == 2  # one W&B run per model
    seen = set()
    for d in dirs:
        out = subprocess.run([str(Path(sys.executable).parent / "wandb"), "leet", "inspect", "--summary", "--json",
                              str(d)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        run = json.loads(out.stdout)
        model = run["name"]
        seen.add(model)
        assert run["state"] == "finished" and run["project"] == "evalcore-demo" and run["step"] == 0
        want = expected_cells(summary, model)
        got = {k: v for k, v in run["summary"].items() if not k.startswith(("_", "evaluation/"))}
        assert set(got) == set(want)
        bad = [k for k, v in want.items() if not same(float(v), float(got[k]) if got[k] is not None else math.nan)]
        assert not bad, bad[:5]
        assert run["summary"]["evaluation/summary"]["nrows"] == int(((summary["model"] == model) & (summary["group"] == "all")).sum())
        assert run["summary"]["evaluation/samples"]["_type"] == "table-file"
        assert run["config"]["evalcore.model"] == model and "config.hash" in run["config"]
        assert "evalcore" in run["tags"] and f"listens-{'yes' if model == 'listener' else 'no'}" in run["tags"]
    assert seen == {"listener", "text-prior"}


def _lm_eval_rules():
    """lm-eval's own file-name helpers when lm-eval imports here, else the same rules as lm_eval/utils.py states them
    (results files hold ``/results_`` and ``.json``; a file's datetime is what follows its last ``_``; a samples
    file's task lies between its first and last ``_``)."""
    try:
        from lm_eval import utils

        return (utils.get_results_filenames, utils.get_sample_results_filenames, utils.get_latest_filename,
                utils.get_file_task_name)
    except ImportError:
        def datetime_of(f: str) -> str:
            return f[f.rfind("_") + 1:].replace(".jsonl", "")

        return (lambda fs: [f for f in fs if "/results_" in f and ".json" in f],
                lambda fs: [f for f in fs if "/samples_" in f and ".json" in f],
                lambda fs: max(fs, key=datetime_of),
                lambda f: f[f.find("_") + 1:f.rfind("_")])


def test_lm_eval_files_carry_every_tasks_headline_metric_in_lm_evals_field_names(logged) -> None:
    cfg, tmp, _, _ = logged
    summary = _summary(cfg)
    results_files, sample_files, latest, task_of = _lm_eval_rules()
    for model in ("listener", "text-prior"):
        files = [p.as_posix() for p in (tmp / "lm_eval" / model).iterdir()]
        found = json.loads(Path(latest(results_files(files))).read_text())
        assert {"results", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "config",
                "model_name", "model_name_sanitized", "date"} <= set(found)
        assert found["model_name"] == model
        tasks = set(found["results"])
        assert tasks == {"factual_synth", "mcq_synth", "freeform_synth"}
        for task in tasks:
            head = found["configs"][task]["metric_list"][0]["metric"]  # the task's first metric: its headline
            protocol = task.split("_")[0]
            row = summary[(summary["model"] == model) & (summary["protocol"] == protocol) & (summary["group"] == "all")
                          & (summary["metric"] == head) & (summary["condition"] == "correct")]
            assert len(row) == 1 and found["results"][task][f"{head},correct"] == row["value"].iloc[0]
            assert found["results"][task][f"{head}_stderr,correct"] == "N/A"  # lm-eval's word for no stderr
            gap = summary[(summary["model"] == model) & (summary["protocol"] == protocol) & (summary["group"] == "all")
                          & (summary["metric"] == head) & (summary["condition"] == "correct-random")]
            assert found["results"][task][f"{head},correct-random"] == gap["value"].iloc[0]
            assert found["results"][task][f"{head}_ci_low,correct-random"] == gap["ci_low"].iloc[0]
            assert found["n-samples"][task]["effective"] > 0 and found["results"][task]["alias"] == task
        assert {"mcq_synth": "accuracy", "factual_synth": "f1_micro", "freeform_synth": "bleu"} == {
            t: found["configs"][t]["metric_list"][0]["metric"] for t in tasks}
        by_task = {task_of(Path(f).name): f for f in sample_files(files)}
        assert set(by_task) == tasks
        lines = [json.loads(x) for x in Path(by_task["mcq_synth"]).read_text().splitlines()]
        per_item = pd.read_parquet(Path(cfg.root) / "tables" / "per_item.parquet")
        assert len(lines) == int(((per_item["model"] == model) & (per_item["protocol"] == "mcq")).sum())
        for key in ("doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                    "doc_hash", "prompt_hash", "target_hash"):
            assert key in lines[0], key
        correct = [x for x in lines if x["filter"] == "correct"]
        mean = sum(x["accuracy"] for x in correct) / len(correct)  # the samples average to the headline
        assert math.isclose(mean, found["results"]["mcq_synth"]["accuracy,correct"], abs_tol=1e-9)


def test_a_replay_adds_nothing_and_failing_sinks_are_one_warning_each(logged, tmp_path, monkeypatch, caplog) -> None:
    cfg, tmp, uri, _ = logged
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(cfg.root).rglob("*") if p.is_file()}
    runs = mlflow_runs(uri, "demo")
    res = CliRunner().invoke(app, ["track", cfg.root, "--track", f"mlflow={uri}"])
    assert res.exit_code == 0, res.output
    assert res.stdout.count("already logged") == 2
    after = mlflow_runs(uri, "demo")
    assert [r.info.run_id for r in after] == [r.info.run_id for r in runs]
    assert [len(r.data.metrics) for r in after] == [len(r.data.metrics) for r in runs]

    monkeypatch.setitem(sys.modules, "wandb", None)  # W&B not installed
    closed = _closed_port()
    with caplog.at_level(logging.WARNING, logger="evalcore"):
        res = CliRunner().invoke(app, ["track", cfg.root, "--track", f"mlflow=http://127.0.0.1:{closed}",
                                       "--track", "wandb"])
    assert res.exit_code == 1, res.output  # a replay whose sinks failed says so; the run is untouched
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, warnings
    mlflow_line = next(w for w in warnings if "mlflow sink failed" in w)
    assert "MlflowException" in mlflow_line and f"evalcore track {cfg.root}" in mlflow_line
    wandb_line = next(w for w in warnings if "wandb sink skipped" in w)
    from evalcore.core.packages import install

    assert install("tracking") in wandb_line
    assert before == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(cfg.root).rglob("*") if p.is_file()}


def test_no_secret_from_the_environment_is_written_anywhere(logged) -> None:
    cfg, tmp, uri, _ = logged
    for folder in (Path(cfg.root), tmp):
        for p in folder.rglob("*"):
            if p.is_file():
                data = p.read_bytes()
                for v in SECRETS.values():
                    assert v.encode() not in data, (p, v)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



REPO = Path(__file__).resolve().parents[1]


def _mlflow_ui() -> Path:
    """The ``mlflow`` of MLflow's UI venv (``EVALCORE_MLFLOW_UI``, else ``.venv-mlflow-ui/bin/mlflow``, which
    scripts/build_mlflow_ui_venv.sh builds); skips without one, except under CI=true (.ci/run builds it)."""
    import os

    found = Path(os.environ.get("EVALCORE_MLFLOW_UI") or REPO / ".venv-mlflow-ui" / "bin" / "mlflow")
    if not found.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"MLflow's UI is missing at {found} (.ci/run builds it: scripts/build_mlflow_ui_venv.sh)")
        pytest.skip(f"MLflow's UI not installed here ({found}): bash scripts/build_mlflow_ui_venv.sh")
    return found


def _get(url: str, body: dict | None = None, timeout: float = 30.0) -> tuple[int, bytes]:
    import urllib.request

    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


@pytest.mark.e2e
def test_the_documented_mlflow_ui_serves_the_store_the_run_wrote(logged, tmp_path) -> None:
    """docs/tracking.md's ``mlflow ui`` command, run as written in the folder of the store the demo's run wrote (a free
    loopback port and one worker added), serves MLflow's page and its script, and the run's experiment and runs:
    the UI is the version of the client that wrote the store (the tracking extra's pin), so it opens it."""
    import os
    import re
    import shlex
    import shutil
    import signal
    import time
    import tomllib

    from ports import free_ports
    from readme import readme_block

    cfg, tmp, uri, _ = logged
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["tracking"]
    (pin,) = [p.split("==")[1] for p in pins if p.startswith("mlflow-skinny==")]  # pinned, not a range
    assert mlflow.__version__ == pin  # the client that wrote the store
    block = readme_block("mlflow-ui", REPO / "docs" / "tracking.md")
    (line,) = [ln.split("#")[0] for ln in block.splitlines() if " ui " in ln]
    argv = shlex.split(line)
    assert argv[0].endswith(".venv-mlflow-ui/bin/mlflow") and argv[1:] == ["ui", "--backend-store-uri",
                                                                         "sqlite:///mlflow.db"]
    assert f"mlflow {pin}" in block
    ui = _mlflow_ui()
    version = subprocess.run([str(ui.parent / "python"), "-c", "import mlflow; print(mlflow.__version__)"],
                             capture_output=True, text=True, timeout=120).stdout.strip()
    assert version == pin
    shutil.copy(uri.removeprefix("sqlite:///"), tmp_path / "mlflow.db")  # the folder holding the store
    (port,) = free_ports(1)
    log = open(tmp_path / "ui.log", "wb")
    proc = subprocess.Popen([str(ui), *argv[1:], "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # a busy 2-core machine: the server takes from seconds to minutes
        while True:
            assert proc.poll() is None, (tmp_path / "ui.log").read_text()[-2000:]
            try:
                if _get(f"{base}/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "mlflow ui did not answer within 300 s"
            time.sleep(1)
        status, page = _get(base + "/")
        assert status == 200 and b'<div id="root"' in page
        script = re.search(rb'<script[^>]+src="\.?/?([^"]+\.js)"', page)
        assert script and _get(f"{base}/{script.group(1).decode()}")[0] == 200  # the UI itself, not a stub page
        exps = json.loads(_get(f"{base}/ajax-api/2.0/mlflow/experiments/search", {"max_results": 100})[1])
        (exp,) = [e for e in exps["experiments"] if e["name"] == "demo"]
        runs = json.loads(_get(f"{base}/ajax-api/2.0/mlflow/runs/search",
                               {"experiment_ids": [exp["experiment_id"]]})[1])["runs"]
        assert {r["info"]["run_name"] for r in runs} == {"listener", "text-prior"}
        assert all(r["info"]["status"] == "FINISHED" and len(r["data"]["metrics"]) > 150 for r in runs)
        assert b"out-of-date database schema" not in (tmp_path / "ui.log").read_bytes()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and its worker: the group this test started
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        log.close()
