"""Trackers' cost: what logging a run to each sink adds to that run's wall time.

Real runs (on a local Ray, started before the clock starts) of the demo's suite over ``--datasets`` synthetic
datasets of ``--clips`` clips each, both weight-free models, every condition: about 500 summary cells per dataset,
so 20 datasets give a run of some 10,000 summary cells. The same run is made with no tracker (the baseline), with
MLflow (a new local sqlite store each time: its tables are made by the trackers' process too), with W&B offline
and with lm-eval's files, ``--repeats`` times each, interleaved. The trackers log from their own process beside the
run's score and report stages (:mod:`evalcore.tracking.process`): printed per sink, the run's wall time, the seconds
it waited for its trackers after its report (``RunResult.tracking_wait_s``) and their share of the run's wall
time; the run's wall time, and its score and report stages' (the driver's work beside which the trackers' process
logs), against the baseline's. Last, for reference, what logging the same run costs in the
run's own process after its report (``track_run``, MLflow imported for the first time in this process, then again).

    .venv/bin/python benchmarks/tracking_overhead.py [--datasets 20] [--clips 3] [--resamples 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

import yaml

from evalcore.runconfig.config import demo_config_path, parse_config
from evalcore.pipeline.graph import init_ray
from evalcore.pipeline.run import run
from evalcore.tracking.record import FinishedRun, headline
from evalcore.tracking.sinks import track_run
from evalcore.core.tracking_config import LmEvalSink, MlflowSink, WandbSink


def config(root: str, datasets: int, clips: int, resamples: int):
    """The demo's suite (protocols, conditions, models) over ``datasets`` synthetic datasets."""
    data = yaml.safe_load(demo_config_path().read_text())
    data["name"] = "tracking-bench"
    data["datasets"] = [{"name": f"synth{i:02d}", "kind": "synthetic",
                         "params": {"n_clips": clips, "seconds": 2.0, "seed": i, "bad_clips": 0}}
                        for i in range(datasets)]
    for p in data["protocols"]:
        p.pop("datasets", None)
    data["storage"] = {"root": root}
    data["stats"] = {**data.get("stats", {}), "bootstrap_resamples": resamples}
    data["ray"] = {**data.get("ray", {}), "progress_bars": False}
    return parse_config(data)


def timed(sinks: list, root: str) -> tuple[float, list]:
    t = time.perf_counter()
    done = track_run(sinks, root)
    return time.perf_counter() - t, done


def last_stages(root: str) -> float:
    """The seconds of the run's score and report stages (run.json's profile): the driver's work the trackers'
    process runs beside."""
    stages = json.loads(open(os.path.join(root, "run.json")).read())["profile"]["stages"]
    return round(sum(s["wall_s"] for s in stages if s["stage"] in ("score", "report")), 2)


SINKS = {
    "none": lambda work, i: [],
    "mlflow": lambda work, i: [MlflowSink(kind="mlflow", uri=f"sqlite:///{work}/mlflow-{i}.db", experiment="bench")],
    "wandb": lambda work, i: [WandbSink(kind="wandb", mode="offline", dir=work, project=f"bench{i}")],
    "lm_eval": lambda work, i: [LmEvalSink(kind="lm_eval", out=os.path.join(work, f"lm_eval-{i}"))],
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=20)
    ap.add_argument("--clips", type=int, default=3)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="evalcore-tracking-bench-")
    init_ray(config(os.path.join(work, "probe"), 1, 1, 100).ray)  # Ray's start is not the run's work
    runs: list[dict] = []
    for i in range(a.repeats):
        for kind, sinks in SINKS.items():
            cfg = config(os.path.join(work, f"run-{kind}-{i}"), a.datasets, a.clips, a.resamples)
            cfg = cfg.model_copy(update={"tracking": sinks(work, i)})
            t = time.perf_counter()
            result = run(cfg)
            wall = time.perf_counter() - t
            last = last_stages(cfg.root)
            runs.append({"sink": kind, "wall_s": round(wall, 2), "score_report_s": last,
                         "waited_s": result.tracking_wait_s, "root": cfg.root})
            print(f"{kind:8s} run {i + 1}: {wall:6.1f} s wall, score + report {last:5.2f} s"
                  + (f", waited {result.tracking_wait_s:.2f} s for its trackers after its report "
                     f"({100 * result.tracking_wait_s / wall:.2f} %)" if result.tracking_wait_s is not None else ""),
                  flush=True)
    fr = FinishedRun(runs[0]["root"])
    n_summary = len(fr.summary)
    n_head = sum(len(headline(fr.summary, m)) for m in fr.models)
    print(f"runs of {n_summary} summary cells, {n_head} headline keys over {len(fr.models)} models "
          f"({a.datasets} datasets × {a.clips} clips, {a.resamples} resamples)")
    base = statistics.mean(r["wall_s"] for r in runs if r["sink"] == "none")
    base_last = statistics.mean(r["score_report_s"] for r in runs if r["sink"] == "none")
    rows = []
    for kind in SINKS:
        mine = [r for r in runs if r["sink"] == kind]
        wall = statistics.mean(r["wall_s"] for r in mine)
        last = statistics.mean(r["score_report_s"] for r in mine)
        row = {"sink": kind, "runs": len(mine), "wall_s": round(wall, 2), "vs_baseline": round(wall / base, 4),
               "score_report_s": round(last, 2), "score_report_vs_baseline": round(last / base_last, 4)}
        if kind != "none":
            waited = [r["waited_s"] for r in mine]
            row.update(waited_s=[round(w, 2) for w in waited],
                       waited_share_max=round(max(w / r["wall_s"] for w, r in zip(waited, mine)), 4))
        rows.append(row)
        print(f"{kind:8s} mean wall {wall:6.1f} s ({100 * (wall / base - 1):+5.1f} % against the baseline), score + "
              f"report {last:5.2f} s ({100 * (last / base_last - 1):+5.1f} %)"
              + (f"; waited {', '.join(f'{w:.2f}' for w in row['waited_s'])} s after the report, at most "
                 f"{100 * row['waited_share_max']:.2f} % of its run" if kind != "none" else ""))
    # for reference: the same logging in the run's own process, after its report (MLflow's first import here)
    root = next(r["root"] for r in runs if r["sink"] == "none")
    inline = []
    for label, sinks in (("mlflow in the run's process: import + log", SINKS["mlflow"](work, "inline-1")),
                         ("mlflow in the run's process: log again", SINKS["mlflow"](work, "inline-2")),
                         ("wandb in the run's process: import + log", SINKS["wandb"](work, "inline-1")),
                         ("lm_eval in the run's process", SINKS["lm_eval"](work, "inline-1"))):
        secs, done = timed(sinks, root)
        inline.append({"sink": label, "seconds": round(secs, 2), "share_of_baseline": round(secs / base, 4),
                       "ok": all(x.ok for x in done)})
        print(f"{label:45s} {secs:6.2f} s  {100 * secs / base:5.2f} % of the baseline run"
              + ("" if inline[-1]["ok"] else "  (FAILED)"))
    print(json.dumps({"summary_cells": n_summary, "headline_keys": n_head, "baseline_wall_s": round(base, 2),
                      "runs": [{k: v for k, v in r.items() if k != "root"} for r in runs], "sinks": rows,
                      "in_the_runs_process": inline}))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
