"""Scale-out: the same run on a Ray cluster of one and of two worker nodes, throughput and each node's share.

The cluster is the multi-node tests' (tests/multinode.py): a head that schedules only (``--num-cpus 0``, the driver
runs there) and N worker nodes on this machine, each holding one custom ``sim_gpu`` resource standing for its GPU.
The model is latency-bound, as a GPU model is: ``simulated_gpu_text`` sleeps ``--seconds-per-batch`` per batch of
``--batch-size`` (no audio to decode, so the figures are the pipeline's and the model's, not decode's), one actor per
``sim_gpu`` (``concurrency`` = the nodes). The questions are multiple choice (a cheap judge: the CPUs of a 2-core
machine are not what is measured). With 2 nodes each node runs
half the batches at once, so the run should take about half as long; the figure is the ratio of the throughputs
(requests per second of the whole run, and of the model stage: its first batch's start to its last batch's end,
from the simulated GPUs' busy logs), and each node's share of the model's busy seconds.

    sudo .venv/bin/python benchmarks/multinode.py [--requests 2000] [--seconds-per-batch 1.0] [--batch-size 16]

As root: each worker node runs in a mount namespace of its own over a private /tmp, as in the tests (several Ray
nodes on one machine cannot share one /tmp: their session directories would hold each other's sockets).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import multinode  # noqa: E402 - the tests' cluster of several nodes on one machine

WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_work", "multinode")


def make_items(n_items: int) -> str:
    """``n_items`` two-option questions over 64 short clips (which the model measured does not read)."""
    import numpy as np
    import soundfile as sf

    os.makedirs(WORK, exist_ok=True)
    for c in range(64):
        if not os.path.exists(p := os.path.join(WORK, f"clip{c:03d}.wav")):
            sf.write(p, np.zeros(1600, dtype="float32"), 16_000)
    path = os.path.join(WORK, f"items-{n_items}.jsonl")
    with open(path, "w") as f:
        for i in range(n_items):
            f.write(json.dumps({"item_id": f"q{i:06d}", "protocol": "mcq", "audio_uri": f"clip{i % 64:03d}.wav",
                                "question": f"Question {i}: is the recording fast or slow?",
                                "options": ["slow", "fast"], "correct_option": i % 2}) + "\n")
    return path


def config(items: str, root: str, busy: str, nodes: int, seconds_per_batch: float, batch_size: int) -> dict:
    return {"name": f"multinode-{nodes}",
            "datasets": [{"name": "q", "kind": "items_file", "params": {"path": items}}],
            "models": [{"name": "gpu", "kind": "simulated_gpu_text",
                        "params": {"seconds_per_batch": seconds_per_batch, "busy_log": busy,
                                   "answer": "The correct answer is (A)."},
                        "resources": {"num_cpus": 0.25, "concurrency": nodes, "batch_size": batch_size,
                                      "custom": {"sim_gpu": 1}}}],
            "protocols": [{"name": "mcq", "conditions": ["correct"]}],
            "storage": {"root": root, "shared_paths": [WORK]}, "stats": {"bootstrap_resamples": 200},
            "max_error_rate": None, "ray": {"decode_num_cpus": 0.25, "progress_bars": False}}


def one(nodes: int, n_items: int, seconds_per_batch: float, batch_size: int) -> dict:
    items = make_items(n_items)
    root, busy = os.path.join(WORK, f"run-{nodes}"), os.path.join(WORK, f"busy-{nodes}")
    for d in (root, busy):
        shutil.rmtree(d, ignore_errors=True)
    path = os.path.join(WORK, f"config-{nodes}.json")
    with open(path, "w") as f:
        json.dump(config(items, root, busy, nodes, seconds_per_batch, batch_size), f)
    cluster = multinode.start(nodes, worker_cpus=2, worker_resources={"sim_gpu": 1})
    try:
        t0 = time.perf_counter()
        proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "evalcore"), "run", path, "--quiet"],
                              env=cluster.env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    finally:
        cluster.stop()
    if proc.returncode != 0:
        raise SystemExit(f"the run on {nodes} node(s) failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    spans: dict[str, list[tuple[float, float]]] = {}
    for name in os.listdir(busy):
        node = name.split("-")[1]
        with open(os.path.join(busy, name)) as f:
            spans.setdefault(node, []).extend((float(a), float(b)) for a, b, _ in (line.split() for line in f))
    every = [s for v in spans.values() for s in v]
    first, last = min(a for a, _ in every), max(b for _, b in every)
    busy_s = {n: sum(b - a for a, b in v) for n, v in spans.items()}
    counts = json.load(open(os.path.join(root, "run.json")))["counts"]
    n = counts["requests_in"]
    return {"nodes": nodes, "requests": n, "wall_s": wall, "requests_per_s": n / wall,
            "model_stage_s": last - first, "model_requests_per_s": n / (last - first),
            "gpu_busy_fraction": sum(busy_s.values()) / (nodes * (last - first)),
            "node_share": {k: v / sum(busy_s.values()) for k, v in sorted(busy_s.items())},
            "scored": counts["requests_scored"], "errored": counts["requests_errored"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000, help="requests (questions) in all")
    ap.add_argument("--seconds-per-batch", type=float, default=1.0)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()
    load = os.getloadavg()
    rows = [one(n, args.requests, args.seconds_per_batch, args.batch_size) for n in (1, 2)]
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"{'nodes':>5} {'requests':>8} {'wall s':>7} {'req/s':>7} {'model s':>8} {'model req/s':>11} "
          f"{'GPU busy':>8}  node shares")
    for r in rows:
        shares = ", ".join(f"{k} {v:.0%}" for k, v in r["node_share"].items())
        print(f"{r['nodes']:>5} {r['requests']:>8} {r['wall_s']:>7.1f} {r['requests_per_s']:>7.1f} "
              f"{r['model_stage_s']:>8.1f} {r['model_requests_per_s']:>11.1f} {r['gpu_busy_fraction']:>8.0%}  {shares}")
    one_, two = rows
    print(f"2 nodes / 1 node: run throughput x{two['requests_per_s'] / one_['requests_per_s']:.2f}, "
          f"model stage throughput x{two['model_requests_per_s'] / one_['model_requests_per_s']:.2f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
