"""Trackers' cost: the time to log a finished run to each sink against that run's own wall time.

A real run (on a local Ray, started before the clock starts) of the demo's suite over ``--datasets`` synthetic
datasets of ``--clips`` clips each, both weight-free models, every condition: about 500 summary cells per dataset,
so 20 datasets give a run of some 10,000 summary cells. Then, in the same process, each sink logs it
(:func:`evalcore.tracking.sinks.track_run`, the run's last stage): MLflow into a local sqlite store (made first in
another process: a new store's tables are made once per store), the first time with MLflow's import (what a run
pays), then again into another experiment; W&B offline, first and again; lm-eval's files. Printed: the run's wall
time, its summary and headline cells, and per step the seconds and their share of the run's wall time.

    .venv/bin/python benchmarks/tracking_overhead.py [--datasets 20] [--clips 3] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

from evalcore.config import demo_config_path, parse_config
from evalcore.pipeline.graph import init_ray
from evalcore.pipeline.run import run
from evalcore.tracking.record import FinishedRun, headline
from evalcore.tracking.sinks import track_run
from evalcore.tracking_config import LmEvalSink, MlflowSink, WandbSink


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=int, default=20)
    ap.add_argument("--clips", type=int, default=3)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="evalcore-tracking-bench-")
    cfg = config(os.path.join(work, "run"), a.datasets, a.clips, a.resamples)
    init_ray(cfg.ray)  # Ray's start is not the run's work
    t = time.perf_counter()
    run(cfg)
    wall = time.perf_counter() - t
    fr = FinishedRun(cfg.root)
    n_summary = len(fr.summary)
    n_head = sum(len(headline(fr.summary, m)) for m in fr.models)
    print(f"run: {wall:.1f} s wall, {n_summary} summary cells, {n_head} headline keys over {len(fr.models)} models "
          f"({a.datasets} datasets × {a.clips} clips, {a.resamples} resamples)")
    rows = []
    store = os.path.join(work, "mlflow.db")
    t = time.perf_counter()  # a new store's tables, once per store: in a child, so this process has not imported mlflow
    subprocess.run([sys.executable, "-c", "import sys; from mlflow import MlflowClient; "
                    "MlflowClient(tracking_uri=sys.argv[1]).search_experiments()", f"sqlite:///{store}"], check=True)
    rows.append({"sink": "mlflow: a new store (once per store, another process)",
                 "seconds": round(time.perf_counter() - t, 2)})
    for label, sinks in (
            ("mlflow: import + log (a run's cost)", [MlflowSink(kind="mlflow", uri=f"sqlite:///{store}",
                                                                experiment="first")]),
            ("mlflow: log again (imported)", [MlflowSink(kind="mlflow", uri=f"sqlite:///{store}", experiment="again")]),
            ("wandb offline: import + log", [WandbSink(kind="wandb", mode="offline", dir=work, project="bench")]),
            ("wandb offline: log again", [WandbSink(kind="wandb", mode="offline", dir=work, project="bench2")]),
            ("lm_eval files", [LmEvalSink(kind="lm_eval", out=os.path.join(work, "lm_eval"))])):
        secs, done = timed(sinks, cfg.root)
        rows.append({"sink": label, "seconds": round(secs, 2), "ok": all(x.ok for x in done)})
    for r in rows:
        r["share_of_run"] = round(r["seconds"] / wall, 4)
        print(f"{r['sink']:55s} {r['seconds']:7.2f} s  {100 * r['share_of_run']:5.2f} % of the run"
              + ("  (FAILED)" if r.get("ok") is False else ""))
    print(json.dumps({"run_wall_s": round(wall, 1), "summary_cells": n_summary, "headline_keys": n_head,
                      "sinks": rows}))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
