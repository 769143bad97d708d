"""``evalcore score cmi``: CMI-Bench outputs someone already has — the released ``model/results/<model>/<model>_<task>.jsonl``
(a JSON list of ``question``, ``response``, ``correct_answer``, ``audioid``, ``other``), or the same fields as JSON
Lines from any harness — scored by the released rules without running a model.

Each file's task comes from its name (``<model>_<task>.jsonl``, :func:`evalcore.datasets.cmi_bench.task_of_file`),
its model from the name's prefix (or ``--model``). Its rows become the judged rows a run's ``mir`` protocol writes
(the captioning tasks: free-form rows, profile ``mullama``, CMI-Bench's own metric choices) and are scored by the
scoring stage (:func:`evalcore.scoring.requests.score_requests`, :func:`evalcore.scoring.summary.summary_table`),
so a figure has one implementation: all files' rows are one job of the stage (:mod:`evalcore.cli.score.stage`). A multi-class file's label set is its own correct answers, as released. Rows
may carry ``item_id`` and ``condition`` (another harness's listening controls): the summary then holds the paired
differences correct − control.

Outputs under ``--out``: ``per_item.parquet``, ``summary.parquet``, ``errors.parquet`` and ``report.md`` with each
figure beside the line the released ``evaluate.py`` prints for it (``BEAT_TRACKING F1: 7.50``; GuZheng's two F1s
under their swapped released names). A row that cannot be scored (no response, not an object, a response the
released scorer would stop on) is an error row, counted: rows in = scored + errored. Text is checked as the items
loader checks it (a lone surrogate, an ``item_id`` over 1,024 characters: an error row); a record whose request
(model, task, ``item_id``, condition) came before is an error row of its own, never merged into the first.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Optional

import pandas as pd
import typer

from evalcore.datasets.cmi_bench import TASKS, Family, label_set_of, task_of_file
from evalcore.datasets.released_mcq import read_records, record_problem
from evalcore.datasets.validate import text_problem
from evalcore.core.errors import INPUT
from evalcore.kinds.base import KINDS
from evalcore.reports.tables_html import fmt
from evalcore.cli.score.app import score_app
from evalcore.cli.score.io import arrow_safe, fail, quiet_mode, unencodable, write_outputs
from evalcore.cli.score.option_groups import COMMON, OUT, Common, takes_groups
from evalcore.cli.score.stage import Job, error_table, job_summary, score_job
from evalcore.cli.score.steps import Counts, close, write_tables
from evalcore.core.seeding import stable_id
from evalcore.textmetrics.metric_config import FreeformMetrics

__all__ = ["released_lines", "judged_rows", "score_files"]

MIR, CAPTIONS = "cmi", "cmi-captions"
#: the captioning tasks' metrics: CMI-Bench's music_captioning is MU-LLaMA's script (the mullama profile);
#: its BERTScore needs roberta-large's weights, which `evalcore score freeform --bertscore-model` takes
def caption_metrics() -> FreeformMetrics:
    """The captions' metrics (CMI-Bench's captioning rule): mullama BLEU, BLEU-4, METEOR, ROUGE. Built when
    scoring, not at import (it reads the metric registry)."""
    return FreeformMetrics(profile="mullama", names=["bleu", "bleu4", "meteor", "rouge"])


def released_lines(model: str, task: str, figures: dict[str, float]) -> list[str]:
    """The lines the released ``evaluate.py`` prints for ``figures`` of one model's task (its format strings)."""
    rule = TASKS[task][1]
    name = f"{model}_{task}"
    if rule == Family.BEAT:
        head = "DOWNBEAT_TRACKING" if "downbeat" in task else "BEAT_TRACKING"
        return [f"{head} F1: {figures['f_measure'] * 100:.2f}", f"Average CMLt: {figures['cmlt'] * 100:.2f}",
                f"Average AMLt: {figures['amlt'] * 100:.2f}"]
    if rule == Family.MULTICLASS:
        return [f"{name} {'genre Acc' if task == 'GTZAN' else 'Acc'}: {figures['accuracy']:.4f}"]
    if rule == Family.KEY:
        return [f"{name} G-Mean: {figures['key_weighted_score']:.4f}"]
    if rule == Family.LYRICS:
        return [f"{name} WER: {figures['wer'] * 100:.2f}", f"{name} CER: {figures['cer'] * 100:.2f}"]
    if rule == Family.TECHNIQUE:  # released: micro printed as "Marco F1", macro as "Micro F1"
        return [f"{name} Marco F1: {figures['frame_f1_micro'] * 100:.2f}",
                f"{name} Micro F1: {figures['frame_f1_macro'] * 100:.2f}"]
    if rule == Family.REGRESSION:
        return [f"{name} R2: {figures['r2']:.4f}"]
    if rule == Family.MELODY:
        return [f"{name} Accuracy: {figures['melody_accuracy']:.4f}"]
    return []


def _answer(v: Any) -> str | None:
    if isinstance(v, list):
        v = v[0] if v else None
    if isinstance(v, bool) or v is None:
        return None
    return str(v) if isinstance(v, (int, float, str)) else None


def judged_rows(records: list[Any], task: str, model: str) -> tuple[list[dict], list[dict]]:
    """(judged rows, input error rows) of one file's records."""
    _, rule, kind = TASKS[task]
    proto = MIR if KINDS.get(kind).released_rules else CAPTIONS
    answers = [r.get("correct_answer") for r in records if isinstance(r, dict)]
    meta = json.dumps({"label_set": label_set_of(answers)}) if rule == Family.MULTICLASS else None
    rows, errors = [], []
    for i, rec in enumerate(records):
        cond = rec.get("condition", "correct") if isinstance(rec, dict) else "correct"
        item = rec.get("item_id") if isinstance(rec, dict) and isinstance(rec.get("item_id"), str) else None
        # an id or a condition the items loader would refuse (too long, not UTF-8) is not kept as a key
        id_problem = next((f"{f}: {why}" for f, v in (("item_id", item), ("condition", cond))
                           if isinstance(v, str) and (why := text_problem("item_id", v))), None)
        if id_problem is not None:
            item, cond = None, "correct"
        base = {"dataset": task, "item_id": item or f"{task}-{i:05d}", "protocol": proto, "protocol_kind": kind,
                "task": task, "model": model, "condition": cond if isinstance(cond, str) else "correct",
                "variant": "default", "option_order": 0}
        base["request_id"] = stable_id(*(base[k] for k in ("dataset", "item_id", "protocol", "model", "condition")))
        bad = record_problem("CMI-Bench output", rec)
        problem = bad.reason if bad is not None else id_problem
        if problem is None and (col := unencodable(rec)) is not None:  # a lone surrogate, as the items loader checks
            problem = f"column {col} is not valid UTF-8 text"
        if problem is None and not isinstance(rec.get("response"), str):
            problem = "no response (text)"
        if problem is None and _answer(rec.get("correct_answer")) is None:
            problem = "no correct_answer"
        if problem is not None:
            errors.append({**base, "error": problem, "error_stage": "input", "error_class": INPUT})
            continue
        rows.append({**base, "category": rule, "text": rec["response"], "reference": _answer(rec["correct_answer"]),
                     "metadata": meta, "chunk_index": 0, "n_chunks": 1, "error": None})
    return rows, errors


def _files(inputs: list[str]) -> list[str]:
    out: list[str] = []
    for uri in inputs:
        p = Path(uri)
        out += sorted(str(f) for f in p.rglob("*.json*")) if p.is_dir() else [uri]
    return out


def _first_of_each(rows: list[dict], seen: dict[str, int], errors: list[dict]) -> list[dict]:
    """``rows`` but those whose request (model, task, item_id, condition) came before, in this file or an earlier
    one: each such duplicate becomes an error row of its own (its request id suffixed), never merged into the
    first (merged, their texts would be joined and scored as one answer)."""
    kept = []
    for r in rows:
        n = seen.get(r["request_id"], 0)
        seen[r["request_id"]] = n + 1
        if n == 0:
            kept.append(r)
            continue
        errors.append({**r, "request_id": f"{r['request_id']}#{n}", "error_stage": "input", "error_class": INPUT,
                       "error": f"item_id {r['item_id'][:80]!r} (condition {r['condition'][:40]!r}) appears again: "
                                f"duplicate {n} of its request, not scored (the first is)"})
    return kept


def score_files(files: list[str], model: str | None, resamples: int, seed: int,
                on_skip: Callable[[str], None] = lambda line: None
                ) -> tuple[pd.DataFrame, pd.DataFrame, list[dict], list[str]]:
    """(per-item table, summary, error rows, files skipped with why) of released output files; ``on_skip`` is
    told each skipped file as it is skipped (the command prints it at once: a later failure cannot hide it)."""
    judged, bad, skipped = [], [], []
    seen: dict[str, int] = {}
    for f in files:
        task = task_of_file(f)
        if task is None:
            skipped.append(f"{f}: not a CMI-Bench task file (<model>_<task>.jsonl): its name ends in no task's name; "
                           f"tasks: {', '.join(TASKS)}")
            on_skip(skipped[-1])
            continue
        stem = Path(f).name.rsplit(".", 1)[0]
        who = model or (stem[: -len(task) - 1] if stem.endswith(f"_{task}") and len(stem) > len(task) + 1 else "model")
        try:
            records = list(read_records(f))
        except (ValueError, OSError) as e:
            skipped.append(f"{f}: {str(e)[:120]}")
            on_skip(skipped[-1])
            continue
        rows, errs = judged_rows(records, task, who)
        judged += _first_of_each(rows, seen, errs)
        bad += errs
    job = Job(judged, params={CAPTIONS: {"metrics": caption_metrics()}})
    scored = score_job(job)
    errors = bad + [r for r in scored.rows if r.get("error") is not None]
    return scored.per_item, job_summary(job, scored, errors, resamples=resamples, seed=seed), errors, skipped


def _report(summary: pd.DataFrame, counts: Counts, skipped: list[str]) -> str:
    """The Markdown report: counts, each figure beside what the released evaluate.py prints, paired differences and
    the files not scored."""
    lines = ["# CMI-Bench outputs scored by the released rules", "",
             f"Rows: {counts.n_in} in = {counts.scored} scored + {counts.errored} errored (tables/errors: "
             "errors.parquet).", "",
             "Value [95 % CI] over n items, per model and task; beside it, what the released evaluate.py prints "
             "for the same figures (github.com/nicolaus625/CMI-bench @ 4c15f410).", "",
             "| model | task | condition | metric | value [95 % CI] | n | evaluate.py prints |", "|---|---|---|---|---|---|---|"]
    vals = summary[(summary["kind"] == "value") & (summary["group"] == "all") & (summary["metric"] != "errored")]
    for (model, task, cond), g in vals.groupby(["model", "dataset", "condition"], sort=True):
        figures = {r.metric: r.value for r in g.itertuples()}
        printed = released_lines(model, task, figures) if all(not math.isnan(v) for v in figures.values()) else []
        for r in g.itertuples():
            lines.append(f"| {model} | {task} | {cond} | {r.metric} | {fmt(r.value)} [{fmt(r.ci_low)}, "
                         f"{fmt(r.ci_high)}] | {r.n} | {'<br>'.join(printed) if r.Index == g.index[0] else ''} |")
    diffs = summary[(summary["kind"] == "paired_diff") & (summary["group"] == "all")]
    if len(diffs):
        lines += ["", "Paired differences correct − control (same items):", ""]
        lines += [f"- {r.model} · {r.dataset} · {r.metric} {r.condition}: {fmt(r.value)} [{fmt(r.ci_low)}, "
                  f"{fmt(r.ci_high)}], n={r.n}" for r in diffs.itertuples()]
    if skipped:
        lines += ["", "Files not scored:", "", *(f"- {s}" for s in skipped)]
    return "\n".join(lines) + "\n"


@score_app.command("cmi")
@takes_groups
def score_cmi(
    inputs: list[str] = typer.Argument(..., metavar="FILE|DIR...", help="Released output files "
                                       "(<model>_<task>.jsonl) or folders holding them (model/results/<model>)."),
    out: str = OUT,
    model: Optional[str] = typer.Option(None, "--model", help="Model name for every file (default: each file "
                                        "name's prefix before _<task>)."),
    common: Common = COMMON,
) -> None:
    """Score CMI-Bench output files by the released rules (accuracy, key, beat, WER, melody, F1, R², captions)."""
    quiet_mode(common.quiet)
    files = _files(inputs)
    if not files:
        fail("cmi", f"no output files under {', '.join(inputs)}")
    # a skipped file is a problem, not progress: said even with --quiet, and as it is skipped
    per_item, summary, errors, skipped = score_files(
        files, model, common.resamples, common.seed, on_skip=lambda s: typer.echo(f"evalcore score cmi: skipped {s}", err=True))
    if not files or len(skipped) == len(files):
        fail("cmi", "no CMI-Bench output file could be read: " + "; ".join(skipped[:3]))
    counts = Counts(len(per_item) + len(errors), len(per_item), len(errors))
    write_outputs(out, arrow_safe(per_item), summary, _report(summary, counts, skipped))
    write_tables(out, {"errors.parquet": error_table(errors)})
    close("cmi", counts, [e.get("error") for e in errors], quiet=common.quiet)

