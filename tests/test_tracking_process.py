"""The trackers' process beside a run's last stage (:mod:`evalcore.tracking.process`), on a hand-made finished run
and a real MLflow sqlite store read back with MLflow's own client: the process logs the run's tables while the run
is still busy (before its report exists), the report when the run ends; a run that fails leaves its tracker runs
FAILED and a replay logs them again; a sink whose package does not import in the run's interpreter is one warning
and never reaches the process; a process that dies is one warning, never the run's failure. The whole run through
``evalcore run`` is tests/test_cli_help.py's ``finished`` run."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import pytest

from evalcore.tracking.process import Beside, beside
from evalcore.tracking.sinks import track_run
from evalcore.core.tracking_config import LmEvalSink, MlflowSink, WandbSink
from tracking_helpers import fresh_mlflow_uri, handmade_run, mlflow_runs

mlflow = pytest.importorskip("mlflow")
pytestmark = pytest.mark.e2e  # a process of its own per test, as a run starts


def _run(tmp_path: Path, cells: int = 300) -> tuple[Path, str]:
    root = tmp_path / "run"
    handmade_run(root, cells)
    return root, fresh_mlflow_uri(tmp_path / "store")


def _logged_runs(uri: str, deadline_s: float = 120.0) -> list:
    """The experiment's runs once the process has made one with its metrics (a bounded wait)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        runs = mlflow_runs(uri, "handmade")
        if runs and runs[0].data.metrics:
            return runs
        time.sleep(0.2)
    raise AssertionError("the trackers' process logged nothing in time")


def test_the_tables_are_logged_while_the_run_renders_its_report_and_the_report_when_it_ends(tmp_path, caplog) -> None:
    root, uri = _run(tmp_path)
    with caplog.at_level(logging.INFO, logger="evalcore"):
        side = Beside([MlflowSink(kind="mlflow", uri=uri), LmEvalSink(kind="lm_eval")], str(root))
        assert side.proc is not None  # a process of its own
        side.tables_written()
        (r,) = _logged_runs(uri)  # logged while this process has not ended the run: no report yet
        assert r.info.status == "RUNNING" and len(r.data.metrics) == 500
        client = mlflow.MlflowClient(tracking_uri=uri)
        assert {a.path for a in client.list_artifacts(r.info.run_id)} == {"summary.parquet", "per_item.parquet"}
        (root / "report.html").write_text("<html>the report</html>")
        done = side.end(True)
    assert [(x.sink, x.ok) for x in done] == [("mlflow", True), ("lm_eval", True)]
    (r,) = mlflow_runs(uri, "handmade")
    assert r.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(r.info.run_id)} == {"report.html", "summary.parquet",
                                                                      "per_item.parquet"}
    assert next((root / "lm_eval" / "m").glob("results_*.json"))
    said = [x.getMessage() for x in caplog.records if x.name == "evalcore"]  # the process's lines, in this log
    assert any(line.startswith("tracking: mlflow: m: experiment 'handmade'") for line in said), said
    assert side.waited_s is not None and side.proc.wait(timeout=60) == 0  # then it ends by itself
    assert side.end(True) == done  # ended once: the same outcomes


def test_a_failed_run_leaves_its_tracker_runs_failed_and_a_replay_logs_them_again(tmp_path) -> None:
    root, uri = _run(tmp_path)
    with pytest.raises(RuntimeError, match="the report broke"):
        with beside([MlflowSink(kind="mlflow", uri=uri)], str(root)) as side:
            side.tables_written()
            _logged_runs(uri)
            raise RuntimeError("the report broke")
    (r,) = mlflow_runs(uri, "handmade")
    assert r.info.status == "FAILED"
    assert "report.html" not in {a.path for a in mlflow.MlflowClient(tracking_uri=uri).list_artifacts(r.info.run_id)}
    (root / "report.html").write_text("<html>rendered again</html>")
    (done,) = track_run([MlflowSink(kind="mlflow", uri=uri)], str(root))  # `evalcore track` logs it again
    assert done.ok
    (again,) = mlflow_runs(uri, "handmade")  # the failed one deleted, one finished run in its place
    assert again.info.status == "FINISHED" and again.info.run_id != r.info.run_id
    assert len(again.data.metrics) == 500


def test_a_sink_that_does_not_import_here_is_one_warning_and_never_sent(tmp_path, monkeypatch, caplog) -> None:
    root, uri = _run(tmp_path)
    monkeypatch.setitem(sys.modules, "wandb", None)  # W&B not installed in the run's interpreter
    with caplog.at_level(logging.INFO, logger="evalcore"):
        with beside([WandbSink(kind="wandb", mode="offline", dir=str(tmp_path)), MlflowSink(kind="mlflow", uri=uri)],
                    str(root)) as side:
            assert [s.kind for s in side.sinks] == ["mlflow"]
            side.tables_written()
    warned = [x.getMessage() for x in caplog.records if x.levelno >= logging.WARNING]
    assert len(warned) == 1 and "wandb sink skipped: needs wandb" in warned[0], warned
    assert not (tmp_path / "wandb").exists()
    assert mlflow_runs(uri, "handmade")[0].info.status == "FINISHED"


def test_a_process_that_dies_is_one_warning_and_the_run_goes_on(tmp_path, caplog) -> None:
    root, uri = _run(tmp_path)
    side = Beside([MlflowSink(kind="mlflow", uri=uri)], str(root))
    side.proc.kill()
    side.proc.wait(timeout=30)
    side.tables_written()
    with caplog.at_level(logging.WARNING, logger="evalcore"):
        (done,) = side.end(True)
    assert not done.ok and "ended without its answer (exit code -9)" in done.said
    assert f"`evalcore track {root}` logs it later" in done.said
    assert [x.getMessage() for x in caplog.records] == [f"WARNING: tracking: {done.said}"]


def test_no_tracking_block_starts_no_process(tmp_path) -> None:
    with beside([], str(tmp_path)) as side:
        side.tables_written()
    assert side.proc is None and side.end(True) == []


def test_a_process_that_cannot_start_leaves_the_logging_to_the_run(tmp_path, monkeypatch, caplog) -> None:
    import evalcore.tracking.process as process

    def refuse(*_a, **_k):
        raise OSError("no more processes")

    root, uri = _run(tmp_path)
    monkeypatch.setattr(process.subprocess, "Popen", refuse)
    with caplog.at_level(logging.WARNING, logger="evalcore"):
        with beside([MlflowSink(kind="mlflow", uri=uri)], str(root)) as side:
            assert side.proc is None
            side.tables_written()  # logged here, in the run's process
            assert mlflow_runs(uri, "handmade")[0].info.status == "RUNNING"
            (root / "report.html").write_text("<html>the report</html>")
    warned = [x.getMessage() for x in caplog.records]
    assert warned == ["WARNING: tracking: cannot start the trackers' process (OSError: no more processes); the run "
                      "logs them itself"], warned
    (r,) = mlflow_runs(uri, "handmade")
    assert r.info.status == "FINISHED" and len(r.data.metrics) == 500
    assert "report.html" in {a.path for a in mlflow.MlflowClient(tracking_uri=uri).list_artifacts(r.info.run_id)}


def test_a_tracker_that_never_answers_costs_the_run_its_deadline_and_one_warning(tmp_path, monkeypatch,
                                                                                 caplog) -> None:
    """An MLflow server that takes connections and never answers (a socket that listens and reads nothing): the run
    waits for the trackers' process no longer than DEADLINE_S (120 s, docs/tracking.md; 3 s here), stops it, and
    says so once with the hint to log later."""
    import socket

    import evalcore.tracking.process as process

    monkeypatch.setattr(process, "DEADLINE_S", 3.0)
    root = tmp_path / "run"
    handmade_run(root, 300)
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)  # connections complete in the kernel's backlog; nothing is ever read or answered
        side = Beside([MlflowSink(kind="mlflow", uri=f"http://127.0.0.1:{hung.getsockname()[1]}")], str(root))
        side.tables_written()
        with caplog.at_level(logging.WARNING, logger="evalcore"):
            (done,) = side.end(True)
    assert not done.ok and "gave no answer within 3 s and was stopped" in done.said
    assert f"`evalcore track {root}` logs it later" in done.said
    assert [x.getMessage() for x in caplog.records] == [f"WARNING: tracking: {done.said}"]
    assert side.proc.wait(timeout=30) is not None  # stopped, not left behind
