"""The Weights & Biases sink: one W&B run per model × suite × checkpoint, as lm-eval's and lmms-eval's W&B
loggers lay out an evaluation (``--wandb_args project=…,name=…,step=N``).

Per model of a finished run: ``wandb.init`` (a nightly's checkpoints grouped as ``<nightly>/<series>``) with the
run's params as its config, its tags (``evalcore``, the
listening verdict, the suite fingerprint, the checkpoint, a nightly verdict) and its note; then one ``run.log`` at
``step`` (the checkpoint's training step in the nightly, else 0) holding every headline cell
(:func:`evalcore.tracking.record.headline`), the model's headline rows of the summary as a ``wandb.Table``
(``evaluation/summary``) and a sample table of per-item answers (``evaluation/samples``, the first ``max_samples``
rows); the report, summary.parquet and the model's per-item rows as an artifact of type ``evalcore_report``.

The run's id is derived from its key (:meth:`FinishedRun.key`), so a replay of the same run or checkpoint lands in
the same W&B run once synced. ``mode: offline`` (or ``WANDB_MODE=offline``) writes ``<dir>/wandb/offline-run-*``
for ``wandb sync``; ``wandb leet inspect --summary --json`` reads it back. W&B reads ``WANDB_API_KEY`` from the
environment; the sink never sees it. Console capture and system metrics are off: the run's console stays the
run's.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from typing import Callable, Iterator

import pandas as pd

from evalcore.tracking.record import ITEM_SCORES, Checkpoint, FinishedRun, headline
from evalcore.core.tracking_config import WandbSink

#: per-item columns of the sample table (those present), then the request's scores
SAMPLE_COLUMNS = ("request_id", "item_id", "protocol", "dataset", "condition", "variant", "option_order", "task",
                  "text", "reference", "labels", "extracted", "options", "correct_index", "parsed_index", "judge")


#: columns of the summary table (its rows: the headline cells; the breakdowns stay in summary.parquet)
SUMMARY_COLUMNS = ("protocol", "dataset", "condition", "variant", "kind", "metric", "value", "ci_low", "ci_high", "n",
                   "definition", "ci_unit", "test", "p_value", "p_adjusted")


def _cell(v: object) -> object:
    """A table cell W&B can hold: lists and arrays as JSON text, NaN as None."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, float) and v != v:
        return None
    return json.dumps(v) if isinstance(v, (list, dict)) else v


def table(wandb, df: pd.DataFrame, columns: tuple[str, ...]):
    """A ``wandb.Table`` of ``df``'s ``columns`` (those present), built from plain rows: W&B infers a type per cell,
    and reading cells out of a DataFrame one by one (``Table(dataframe=…)``) costs as much again."""
    cols = [c for c in columns if c in df.columns]
    return wandb.Table(columns=cols, data=[[_cell(v) for v in row] for row in df[cols].itertuples(index=False)])


#: W&B's console notices off unless the environment says otherwise (its banner, the Weave suggestion it prints on
#: finding the openai package imported)
QUIET = {"WANDB_SILENT": "true", "WANDB_DISABLE_WEAVE": "true"}


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    set_here = {k: v for k, v in QUIET.items() if k not in os.environ}
    os.environ.update(set_here)
    try:
        yield
    finally:
        for k in set_here:
            os.environ.pop(k, None)


def warm(sink: WandbSink) -> None:
    """Import W&B, so that logging later starts at once."""
    with quiet():
        import wandb  # heavy: seconds to import; an optional package
    del wandb  # imported: the logging later finds it in sys.modules


def begin(sink: WandbSink, run: FinishedRun, model: str, checkpoint: Checkpoint | None = None) -> Callable[[bool], str]:
    """Log all of ``model`` but its report: the run, its config, metrics and tables. Returns the rest, to call once
    the run finished with its report (True: the artifact with the report, and the run finished) or failed (False:
    the W&B run finishes with exit code 1, for ``evalcore track`` to log it again); it returns what was done."""
    with quiet():
        return _begin(sink, run, model, checkpoint)


def _begin(sink: WandbSink, run: FinishedRun, model: str, checkpoint: Checkpoint | None) -> Callable[[bool], str]:
    import wandb  # heavy: an optional package (wandb-core starts a service process)

    tags = run.tags(model, checkpoint)
    name = sink.run_name or (f"{model}@{checkpoint.name}" if checkpoint else model)
    labels = ["evalcore", f"listens-{tags['evalcore.listens']}", f"suite-{tags['evalcore.suite_fingerprint']}"]
    if checkpoint is not None:
        labels += [f"checkpoint-{checkpoint.name}"[:64], str(checkpoint.verdict or "unknown")]
    settings = wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True, save_code=False,
                              init_timeout=sink.timeout_s, x_save_requirements=False, reinit="create_new")
    group = f"{checkpoint.nightly or 'nightly'}/{checkpoint.series}" if checkpoint else None
    wb = wandb.init(project=sink.project, entity=sink.entity, name=name, id=tags["evalcore.key"], dir=sink.dir,
                    group=group,
                    mode=sink.mode, config={**run.params(model), **tags}, tags=labels,
                    notes=run.note(model, checkpoint), settings=settings, resume="allow")
    try:
        step = checkpoint.step if checkpoint else 0
        cells = headline(run.summary, model)
        own = run.summary[(run.summary["model"] == model) & (run.summary["group"] == "all")]
        items = run.per_item[run.per_item["model"] == model]
        scores = tuple(c for c in ITEM_SCORES if c in items.columns and items[c].notna().any())
        wb.log({**dict(zip(cells["key"], cells["value"].astype(float))),
                "evaluation/summary": table(wandb, own, SUMMARY_COLUMNS),
                "evaluation/samples": table(wandb, items.head(sink.max_samples), SAMPLE_COLUMNS + scores)}, step=step)
    except BaseException:
        wb.finish(exit_code=1)
        raise
    where = getattr(wb.settings, "sync_dir", None) if wb.settings.mode == "offline" else getattr(wb, "url", None)
    said = f"project {sink.project!r}, run {wb.id} ({len(cells)} metrics){f' → {where}' if where else ''}"

    def end(finished: bool) -> str:
        with quiet():
            if not finished:
                wb.finish(exit_code=1)
                return f"{said}: finished with exit code 1, as the run failed"
            try:
                log_report(wandb, wb, run, model, tags["evalcore.key"])
                wb.finish()
            except BaseException:
                wb.finish(exit_code=1)
                raise
        return said

    return end


def log_report(wandb, wb, run: FinishedRun, model: str, key: str) -> None:
    """The report, summary.parquet and the model's per-item rows as one artifact of type ``evalcore_report``."""
    art = wandb.Artifact(f"report-{key}", type="evalcore_report", metadata={"model": model, "run_root": run.root})
    with tempfile.TemporaryDirectory(prefix="evalcore-wandb-") as tmp:
        for local in run.copied(tmp, (("report.html",), ("tables", "summary.parquet"))) + [run.items_file(tmp, model)]:
            art.add_file(local)
        wb.log_artifact(art)
