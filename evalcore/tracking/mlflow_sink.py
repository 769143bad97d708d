"""The MLflow sink: one MLflow run per model × suite × checkpoint, written with MLflow's own client.

Per model of a finished run (:class:`evalcore.tracking.record.FinishedRun`): a run named ``run_name`` (default the
model, ``<model>@<checkpoint>`` in the nightly) in ``experiment`` (default the run's name; the nightly's name for its
checkpoints), with

* tags: the suite fingerprint, model, checkpoint, listening verdict, the run's key and, in the nightly, series,
  step, verdict and the count of flagged comparisons; the note (``mlflow.note.content``, MLflow's run description)
  lists the flagged comparisons;
* params: :meth:`FinishedRun.params` (version, config hash, seeds, checkpoint identity, judges, prompts,
  definitions, dataset fingerprints);
* metrics: every headline cell (:func:`evalcore.tracking.record.headline`) at ``step`` (the checkpoint's training
  step in the nightly, else 0), all with one timestamp;
* artifacts: report.html, summary.parquet and the model's rows of per_item.parquet.

In the nightly, the checkpoints' runs of a series are children (``mlflow.parentRunId``) of the series' own run,
``<model> (series)``, which gets every checkpoint's headline cells at its step: one point per checkpoint per metric,
drawn by MLflow as a curve by training step beside the training loss.

In two steps (:func:`begin`, then the function it returns): everything but the report once the run's tables are
written, then report.html and the run's end (FINISHED, or FAILED when the run failed); a run's trackers' process
(:mod:`evalcore.tracking.process`) logs the first while the run renders its report. :func:`warm` imports MLflow
and opens the store ahead (a new sqlite store's tables take seconds).

Everything goes through ``MlflowClient.log_batch`` in chunks within MLflow's limits (1,000 metrics, 100 params, 100
tags per call), never one call per number. Before creating a run the sink searches the experiment for a finished
run with the same ``evalcore.key`` tag and logs nothing when there is one (a replay, a resumed checkpoint logged
already); an unfinished one (a logging that died) is deleted and logged again.

A tracking server is asked with bounded retries (``timeout_s``, ``retries``; MLflow's own defaults would retry for
minutes). MLflow reads credentials from its environment (``MLFLOW_TRACKING_TOKEN`` …); the sink never sees them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from typing import Callable, Iterator

from evalcore.core.fingerprint import digest
from evalcore.tracking.record import Checkpoint, FinishedRun, headline
from evalcore.core.tracking_config import DEFAULT_MLFLOW_URI, MlflowSink

METRICS_PER_BATCH = 1000
PARAMS_PER_BATCH = 100
TAGS_PER_BATCH = 100
PARAM_CHARS = 6000  # MLflow's longest param value
TABLES = (("tables", "summary.parquet"),)
REPORT = (("report.html",),)


def tracking_uri(sink: MlflowSink) -> str:
    return sink.uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_MLFLOW_URI


@contextlib.contextmanager
def bounded_requests(sink: MlflowSink) -> Iterator[None]:
    """MLflow's HTTP retries and timeout bounded by the sink's settings (unless set in the environment); MLflow's
    INFO lines (a new store's migrations) and urllib3's retry notices kept off the run's console (the sink's one
    warning says what failed)."""
    env = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(sink.retries), "MLFLOW_HTTP_REQUEST_TIMEOUT": str(int(sink.timeout_s)),
           "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1"}
    set_here = {k: v for k, v in env.items() if k not in os.environ}
    quiet = {"mlflow": logging.WARNING, "alembic": logging.WARNING, "urllib3.connectionpool": logging.ERROR}
    loggers = [logging.getLogger(n) for n in quiet]
    levels = [lg.level for lg in loggers]
    os.environ.update(set_here)
    for lg in loggers:
        lg.setLevel(quiet[lg.name])
    try:
        yield
    finally:
        for k in set_here:
            os.environ.pop(k, None)
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def chunks(seq: list, n: int) -> Iterator[list]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def warm(sink: MlflowSink) -> None:
    """Import MLflow and open the sink's store (a new sqlite store makes its tables here), so that logging later
    starts at once; an unreachable store is left for the logging to report."""
    from mlflow import MlflowClient

    with bounded_requests(sink):
        MlflowClient(tracking_uri=tracking_uri(sink)).search_experiments(max_results=1)


def begin(sink: MlflowSink, run: FinishedRun, model: str, checkpoint: Checkpoint | None = None) -> Callable[[bool], str]:
    """Log all of ``model`` but its report: the run, its params, metrics and tables. Returns the rest, to call once
    the run finished with its report (True: report.html is logged and the run FINISHED) or failed (False: the
    run is marked FAILED, for ``evalcore track`` to log it again); it returns what was done."""
    from mlflow import MlflowClient  # heavy: mlflow (seconds to import); an optional package
    from mlflow.entities import Metric, Param

    uri = tracking_uri(sink)
    with bounded_requests(sink):
        client = MlflowClient(tracking_uri=uri)
        experiment = sink.experiment or (checkpoint and checkpoint.nightly) or run.name
        exp = client.get_experiment_by_name(experiment)
        exp_id = exp.experiment_id if exp is not None else client.create_experiment(
            experiment, artifact_location=artifact_root(uri))
        cells = headline(run.summary, model)
        step, now = (checkpoint.step if checkpoint else 0), int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, step) for k, v in zip(cells["key"], cells["value"])]
        parent = series_run(client, exp_id, run, model, checkpoint) if checkpoint is not None else None
        tags = run.tags(model, checkpoint)
        for r in client.search_runs([exp_id], filter_string=f"tags.`evalcore.key` = '{tags['evalcore.key']}'"):
            if r.info.status == "FINISHED":
                added = parent is not None and append_step(client, parent, metrics, step)
                said = (f"already logged (run {r.info.run_id}); "
                        + ("its step added to the series' run" if added else "nothing added"))
                return lambda _finished: said
            client.delete_run(r.info.run_id)  # an earlier logging that died part way
        name = sink.run_name or (f"{model}@{checkpoint.name}" if checkpoint else model)
        tags["mlflow.note.content"] = run.note(model, checkpoint)
        if parent is not None:
            tags["mlflow.parentRunId"] = parent
        run_id = client.create_run(exp_id, run_name=name, tags=tags).info.run_id
        try:
            params = [Param(k, str(v)[:PARAM_CHARS]) for k, v in run.params(model).items()]
            for part in chunks(params, PARAMS_PER_BATCH):
                client.log_batch(run_id, params=part, synchronous=True)
            for part in chunks(metrics, METRICS_PER_BATCH):
                client.log_batch(run_id, metrics=part, synchronous=True)
            log_files(client, run_id, run, TABLES, model)  # summary.parquet, the model's per-item rows
        except BaseException:
            client.set_terminated(run_id, status="FAILED")
            raise
    said = f"experiment {experiment!r}, run {run_id} ({len(metrics)} metrics, {len(params)} params)"

    def end(finished: bool) -> str:
        with bounded_requests(sink):
            if not finished:
                client.set_terminated(run_id, status="FAILED")
                return f"{said}: marked FAILED with the run"
            try:
                log_files(client, run_id, run, REPORT)
            except BaseException:
                client.set_terminated(run_id, status="FAILED")
                raise
            client.set_terminated(run_id)
            if parent is not None:
                append_step(client, parent, metrics, step)
        return said

    return end


def series_run(client, exp_id: str, run: FinishedRun, model: str, checkpoint: Checkpoint) -> str:
    """The id of the series' own run (``<model> (series)``, made on its first checkpoint), parent of the checkpoints'
    runs: it holds every checkpoint's headline cells at their steps, so MLflow draws each metric as a curve by step
    (a checkpoint's own run holds one point)."""
    fingerprint = checkpoint.suite_fingerprint or run.fingerprint
    key = digest(["series", fingerprint, checkpoint.series])
    for r in client.search_runs([exp_id], filter_string=f"tags.`evalcore.key` = '{key}'"):
        return r.info.run_id
    note = (f"{checkpoint.series}: every checkpoint's headline cells at its training step (evalcore nightly); each "
            "checkpoint's own run, below this one, holds its params, verdict and artifacts")
    made = client.create_run(exp_id, run_name=f"{model} (series)", tags={
        "evalcore.key": key, "evalcore.series": checkpoint.series, "evalcore.model": model,
        "evalcore.suite_fingerprint": fingerprint, "evalcore.series_run": "true", "mlflow.note.content": note})
    client.set_terminated(made.info.run_id)
    return made.info.run_id


def append_step(client, parent: str, metrics: list, step: int) -> bool:
    """Add ``metrics`` (all at ``step``) to the series' run unless it holds that step already; whether it added."""
    if not metrics or any(h.step == step for h in client.get_metric_history(parent, metrics[0].key)):
        return False
    for part in chunks(metrics, METRICS_PER_BATCH):
        client.log_batch(parent, metrics=part, synchronous=True)
    return True


def artifact_root(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a local sqlite store (``<db dir>/mlartifacts/``), not in
    the working directory; a server decides for itself (None)."""
    if not uri.startswith("sqlite:///"):
        return None
    return os.path.join(os.path.dirname(os.path.abspath(uri.removeprefix("sqlite:///"))), "mlartifacts")


def log_files(client, run_id: str, run: FinishedRun, files: tuple[tuple[str, ...], ...], model: str | None = None,
              ) -> None:
    """The run's ``files`` that exist (and ``model``'s rows of per_item.parquet), through a local directory."""
    with tempfile.TemporaryDirectory(prefix="evalcore-mlflow-") as tmp:
        for local in run.copied(tmp, files) + ([run.items_file(tmp, model)] if model is not None else []):
            client.log_artifact(run_id, local)
