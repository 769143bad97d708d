"""Trackers' cost: the time to log a finished run to each sink against that run's own wall time.

A real run (on a local Ray, started before the clock starts) of the demo's suite over ``--datasets`` synthetic
datasets of ``--clips`` clips each, both weight-free models, every condition: about 500 summary cells per dataset,
so 20 datasets give a run of some 10,000 summary cells. Then, in the same process, each sink logs it
(:func:`evalcore.tracking.sinks.track_run`, the run's last stage): MLflow into a fresh local sqlite store (its
first import and the store's creation included: *cold*), then again into a new experiment of the same store
(*warm*); W&B offline; lm-eval's files. Printed: the run's wall time, its summary and headline cells, and per sink
the seconds and their share of the run's wall time.

    .venv/bin/python benchmarks/tracking_overhead.py [--datasets 20] [--clips 3] [--resamples 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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
    for label, sinks in (
            ("mlflow (cold: import, new store)", [MlflowSink(kind="mlflow", uri=f"sqlite:///{store}",
                                                             experiment="cold")]),
            ("mlflow (warm)", [MlflowSink(kind="mlflow", uri=f"sqlite:///{store}", experiment="warm")]),
            ("wandb offline", [WandbSink(kind="wandb", mode="offline", dir=work, project="bench")]),
            ("lm_eval files", [LmEvalSink(kind="lm_eval", out=os.path.join(work, "lm_eval"))])):
        secs, done = timed(sinks, cfg.root)
        ok = all(x.ok for x in done)
        rows.append({"sink": label, "seconds": round(secs, 2), "share_of_run": round(secs / wall, 4), "ok": ok})
        print(f"{label:34s} {secs:7.2f} s  {100 * secs / wall:5.2f} % of the run{'' if ok else '  (FAILED)'}")
    print(json.dumps({"run_wall_s": round(wall, 1), "summary_cells": n_summary, "headline_keys": n_head,
                      "sinks": rows}))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
