"""lm-evaluation-harness's result files, so scripts and leaderboards that parse lm-eval output read evalcore's.

The layout and field names are lm-eval's own (EleutherAI/lm-evaluation-harness at 4e7e0d4:
``lm_eval/loggers/evaluation_tracker.py`` writes them, ``lm_eval/result_schema.py`` types them, and
``lm_eval/utils.py``'s ``get_results_filenames`` / ``get_sample_results_filenames`` / ``get_file_task_name`` /
``get_file_datetime`` / ``get_latest_filename`` find them again):

* ``<out>/<model, sanitized>/results_<datetime>.json`` — ``results`` (task → ``alias``, ``"<metric>,<filter>"``:
  value, ``"<metric>_stderr,<filter>"``), ``group_subtasks``, ``configs`` (task → ``task``, ``output_type``,
  ``metric_list`` …), ``versions``, ``n-shot``, ``higher_is_better``, ``n-samples`` (``original``,
  ``effective``), ``config`` (``model``, ``model_args``, ``bootstrap_iters``, ``random_seed`` …), ``date``,
  ``model_name``, ``model_name_sanitized``, ``task_hashes``, ``total_evaluation_time_seconds``;
* ``<out>/<model, sanitized>/samples_<task>_<datetime>.jsonl`` — one line per request: ``doc_id``, ``doc``,
  ``target``, ``arguments`` (``{"gen_args_0": {"arg_0": prompt, "arg_1": {}}}``), ``resps``, ``filtered_resps``,
  ``filter``, ``metrics``, ``doc_hash``, ``prompt_hash``, ``target_hash`` and the request's scores. A
  multiple-choice request's ``doc`` holds its ``options`` in the order *that request* presented them (the option
  order it was asked in: shuffled orders differ) and the right one's index among them, ``correct_option``; its
  ``arg_0`` is the question followed by those options, lettered as presented (``(A) …``), not the bare question. The
  prompt template around them is the protocol's (the run's ``config.yaml``); the per-item table keeps no prompt.

``<datetime>`` is ``datetime.now().isoformat()`` with ``:`` as ``-`` (lm-eval's ``date_id``); model names are
sanitized as ``sanitize_model_name`` does (``"<>:/|\\?*[]`` runs → ``__``).

How evalcore maps onto lm-eval (ours, stated): a *task* is a protocol instance on one dataset
(``<protocol>_<dataset>``, ``_<variant>`` for a prompt variant other than ``default``); the *filter* slot of a
metric key holds the audio condition (``accuracy,correct``, ``accuracy,random``, and the listening difference
``accuracy,correct-random``), so lm-eval's tables show one row per condition. The task's headline metric is the
first of its ``metric_list`` (the protocol's primary metric, :data:`evalcore.reports.verdict.PRIMARY`). evalcore
computes bootstrap CIs, not standard errors: ``<metric>_stderr`` is ``"N/A"`` (lm-eval's own value when it has
none), and the CI bounds are the extra keys ``<metric>_ci_low`` / ``<metric>_ci_high``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from typing import Callable

from evalcore.core import storage
from evalcore.tracking.record import ITEM_SCORES, Checkpoint, FinishedRun, primary_metric, safe
from evalcore.core.tracking_config import LmEvalSink

#: lm-eval's ``sanitize_model_name`` pattern
_MODEL_UNSAFE = re.compile(r"[\"<>:/|\\?*\[\]]+")
#: per-item score column → the summary metric it is the per-request value of
SCORE_METRIC = {"correct": "accuracy", "correct_strict": "accuracy_strict", "f1": "f1", "precision": "precision",
                "recall": "recall"}


def sanitize_model_name(name: str) -> str:
    return _MODEL_UNSAFE.sub("__", name)


def task_name(protocol: str, dataset: str, variant: str | None) -> str:
    parts = [protocol, dataset] + ([] if variant in (None, "", "default") else [variant])
    return "_".join(safe(p).replace("/", "_").replace(" ", "_") for p in parts)


def date_id(now: dt.datetime | None = None) -> str:
    """lm-eval's file datetime: ``2026-11-28T03-45-12.123456``."""
    return (now or dt.datetime.now()).isoformat().replace(":", "-")


def _num(x: object) -> object:
    """A JSON number, or ``"N/A"`` for a missing one (lm-eval writes ``"N/A"`` where it has no value)."""
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "N/A"
    return "N/A" if math.isnan(v) else v


def _sha(text: object) -> str:
    return hashlib.sha256(str(text).encode()).hexdigest()


def results(run: FinishedRun, model: str, checkpoint: Checkpoint | None = None) -> dict:
    """The ``results_<datetime>.json`` mapping of ``model``."""
    cells = run.summary[(run.summary["model"] == model) & (run.summary["group"] == "all")]
    out: dict = {"results": {}, "group_subtasks": {}, "configs": {}, "versions": {}, "n-shot": {},
                 "higher_is_better": {}, "n-samples": {}}
    for (protocol, dataset, variant), rows in cells.groupby(["protocol", "dataset", "variant"], sort=True):
        task = task_name(protocol, dataset, variant)
        metrics = list(dict.fromkeys(rows.loc[rows["metric"] != "errored", "metric"]))
        if not metrics:
            continue
        head = primary_metric(metrics)
        ordered = [head] + [m for m in metrics if m != head]
        res: dict = {"alias": task}
        for r in rows.itertuples():
            res[f"{r.metric},{r.condition}"] = _num(r.value)
            if r.metric != "errored":
                res[f"{r.metric}_stderr,{r.condition}"] = "N/A"
            if r.kind == "paired_diff":
                res[f"{r.metric}_ci_low,{r.condition}"] = _num(r.ci_low)
                res[f"{r.metric}_ci_high,{r.condition}"] = _num(r.ci_high)
        n = int(rows.loc[(rows["condition"] == "correct") & (rows["metric"] == head), "n"].max()
                if ((rows["condition"] == "correct") & (rows["metric"] == head)).any() else rows["n"].max())
        out["results"][task] = res
        out["group_subtasks"][task] = []
        out["configs"][task] = {
            "task": task, "dataset_name": dataset, "output_type": "generate_until",
            "metric_list": [{"metric": m, "aggregation": "mean", "higher_is_better": True} for m in ordered],
            "metadata": {"evalcore_protocol": protocol, "variant": variant,
                         "conditions": sorted(set(rows["condition"])),
                         "definitions": {m: str(d) for m, d in zip(rows["metric"], rows["definition"])}}}
        out["versions"][task] = str(run.meta.get("version"))
        out["n-shot"][task] = 0
        out["higher_is_better"][task] = {m: True for m in ordered}
        out["n-samples"][task] = {"original": n, "effective": n}
    ck = run.checkpoint_identity(model)
    spec = next((m for m in run.config.get("models") or [] if m.get("name") == model), {})
    seeds = run.config.get("seeds") or {}
    out["config"] = {"model": spec.get("kind") or model, "model_args": {**(spec.get("params") or {}), **ck},
                     "batch_size": (spec.get("resources") or {}).get("batch_size"), "batch_sizes": [],
                     "device": None, "use_cache": None, "limit": None,
                     "bootstrap_iters": (run.config.get("stats") or {}).get("bootstrap_resamples"),
                     "gen_kwargs": None, "random_seed": seeds.get("derangement"), "numpy_seed": seeds.get("noise"),
                     "torch_seed": None, "fewshot_seed": seeds.get("icl")}
    name = f"{model}@{checkpoint.name}" if checkpoint else model
    out.update({"git_hash": None, "date": dt.datetime.now().timestamp(), "model_source": "evalcore",
                "model_name": name, "model_name_sanitized": sanitize_model_name(name),
                "evalcore_version": run.meta.get("version"), "evalcore_run_root": run.root,
                "evalcore_suite_fingerprint": run.fingerprint, "task_hashes": {},
                "total_evaluation_time_seconds": "N/A"})
    if checkpoint is not None:
        out["evalcore_checkpoint"] = {"series": checkpoint.series, "name": checkpoint.name, "step": checkpoint.step,
                                      "verdict": checkpoint.verdict, "flagged": list(checkpoint.flagged)}
    return out


def samples(run: FinishedRun, model: str) -> dict[str, list[dict]]:
    """task → the ``samples_<task>_<datetime>.jsonl`` lines of ``model`` (one per request, its condition as the
    filter)."""
    items = run.per_item[run.per_item["model"] == model]
    questions = {}
    if "question" in run.items.columns:
        questions = dict(zip(zip(run.items["dataset"], run.items["item_id"]), run.items["question"]))
    out: dict[str, list[dict]] = {}
    doc_ids: dict[str, dict[str, int]] = {}  # task → item → its index among the task's items
    for r in items.to_dict("records"):
        task = task_name(r["protocol"], r["dataset"], r.get("variant"))
        ids = doc_ids.setdefault(task, {})
        doc_id = ids.setdefault(r["item_id"], len(ids))
        question = questions.get((r["dataset"], r["item_id"]), "")
        shown = _presented(r)
        prompt = question + "".join(f"\n({LETTERS[i]}) {o}" for i, o in enumerate(shown or []))
        target = r.get("reference") if isinstance(r.get("reference"), str) else _target(r)
        scores = {SCORE_METRIC.get(c, c): float(r[c]) for c in ITEM_SCORES
                  if c in r and r[c] is not None and not (isinstance(r[c], float) and math.isnan(r[c]))}
        doc = {"item_id": r["item_id"], "request_id": r["request_id"], "dataset": r["dataset"],
               "question": question, "condition": r["condition"], "option_order": r.get("option_order")}
        if shown is not None:  # as this request presented them, and the right one among them
            doc.update(options=shown, correct_option=_int(r.get("correct_index")))
        answer = r.get("text") if isinstance(r.get("text"), str) else ""
        out.setdefault(task, []).append({
            "doc_id": doc_id, "doc": doc, "target": str(target), "arguments": {"gen_args_0": {"arg_0": prompt,
                                                                                              "arg_1": {}}},
            "resps": [[answer]], "filtered_resps": [answer], "filter": r["condition"], "metrics": list(scores),
            "doc_hash": _sha(json.dumps(doc, sort_keys=True, default=str)), "prompt_hash": _sha(prompt),
            "target_hash": _sha(target), **scores})
    return out


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _presented(r: dict) -> list[str] | None:
    """A multiple-choice request's options in the order it presented them (per_item's ``options``), else None."""
    options = r.get("options")
    if options is None or (isinstance(options, float) and math.isnan(options)) or not len(options):
        return None
    return [str(o) for o in list(options)[:len(LETTERS)]]


def _int(v: object) -> int | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)  # type: ignore[arg-type]


def _target(r: dict) -> object:
    """The gold answer of a request without a reference text: its labels or its correct option."""
    labels = r.get("labels")
    if labels is not None and len(labels):
        return ", ".join(map(str, list(labels)))
    options, i = r.get("options"), r.get("correct_index")
    if options is not None and i is not None and not (isinstance(i, float) and math.isnan(i)):
        return list(options)[int(i)]
    return ""


def write(sink: LmEvalSink, run: FinishedRun, model: str, checkpoint: Checkpoint | None = None) -> str:
    """Write ``model``'s results and samples files; returns where."""
    name = f"{model}@{checkpoint.name}" if checkpoint else model
    folder = storage.join(sink.out or run.path("lm_eval"), sanitize_model_name(name))
    stamp = date_id()
    found = results(run, model, checkpoint)
    storage.write_text(storage.join(folder, f"results_{stamp}.json"),
                       json.dumps(found, indent=2, ensure_ascii=False, default=str))
    for task, lines in samples(run, model).items():
        storage.write_text(storage.join(folder, f"samples_{task}_{stamp}.jsonl"),
                           "".join(json.dumps(x, ensure_ascii=False, default=str) + "\n" for x in lines))
    return f"{len(found['results'])} task(s) → {folder}"



def begin(sink: LmEvalSink, run: FinishedRun, model: str, checkpoint: Checkpoint | None = None) -> Callable[[bool], str]:
    """Write the files now (they hold no report); the rest is only what was done."""
    said = write(sink, run, model, checkpoint)
    return lambda _finished: said
