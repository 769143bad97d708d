"""Scale: the real pipeline (local Ray) with simulated GPU models, at growing numbers of requests.

Four ``simulated_gpu_text`` models (a fixed sleep per batch, each actor holding one custom ``sim_gpu``
resource standing for a GPU; they read no audio, so the figures are the pipeline's, not decode's) answer
free-form questions of one items-file dataset (64 short synthesized clips, many questions each) under
``correct`` and ``random``; the default ``mullama`` lexical metrics (BLEU, BLEU-4, METEOR, ROUGE) score them.
Requests = items × 4 models × 2 conditions.

The default 0.5 s per full batch of 64 has four GPUs ask for about 512 requests/s, far faster than a real
audio LM and more than a 2-core machine's CPU stages (judge, scoring, commit) drain: there the busy fraction
is bounded by the CPUs. A longer sleep (``--seconds-per-batch 1.0``) says whether the pipeline keeps GPUs fed
when the CPUs keep up; a shorter one measures the CPU stages.

Every size runs in its own driver process (so its peak RSS is its own) and prints wall time, requests/s,
the driver's peak RSS (and the peaks of its anonymous and shared parts), the simulated GPUs' busy fraction
over the model stage (first batch start to last batch end, from the models' busy logs), how full the model
batches were, time per stage (items and requests; the Ray Data stage decode → model → judge with commits;
the accounting read-back; scoring, tables and report) and the time from the last model answer to the written
report; then how each grows from one size to the next.

    .venv/bin/python benchmarks/scale.py [--requests 20000 100000] [--big] [--gpus 4] [--seconds-per-batch 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time

WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_work", "scale")
MODELS = 4
CONDITIONS = ["correct", "random"]
CLIPS = 64
WORDS = ("guitar piano drums violin bass synth vocals flute cello trumpet calm upbeat dark bright slow fast "
         "jazz rock pop folk ambient classical electronic blues major minor waltz march lullaby anthem").split()


def make_items(n_items: int) -> str:
    """An items file of ``n_items`` free-form questions over CLIPS short clips (written once per size)."""
    import numpy as np
    import soundfile as sf

    d = os.path.join(WORK, "data")
    os.makedirs(os.path.join(d, "audio"), exist_ok=True)
    for c in range(CLIPS):
        p = os.path.join(d, "audio", f"clip{c:03d}.wav")
        if not os.path.exists(p):
            sf.write(p, (0.1 * np.sin(np.arange(8000) * (c + 1) / 50)).astype("float32"), 16_000)
    path = os.path.join(d, f"items-{n_items}.jsonl")
    if not os.path.exists(path):
        with open(path + ".tmp", "w") as f:
            for i in range(n_items):
                w = [WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7, 11)]
                f.write(json.dumps({"item_id": f"q{i:07d}", "protocol": "freeform", "task": "caption",
                                    "audio_uri": f"audio/clip{i % CLIPS:03d}.wav",
                                    "question": f"Describe the {w[0]} and {w[1]} in this piece (question {i}).",
                                    "reference": f"A {w[2]} {w[3]} piece with {w[0]} and {w[1]}, item {i % 97}."})
                        + "\n")
        os.replace(path + ".tmp", path)
    return path


def config(n_items: int, root: str, busy: str, seconds_per_batch: float, batch_size: int):
    from evalcore.runconfig.config import parse_config

    models = [{"name": f"sim{m}", "kind": "simulated_gpu_text",
               "params": {"seconds_per_batch": seconds_per_batch, "busy_log": busy,
                          "answer": f"System {m} hears {{prompt}}" if m % 2 else "A piece: {prompt}"},
               "resources": {"num_cpus": 0.01, "concurrency": 1, "batch_size": batch_size,
                             "custom": {"sim_gpu": 1}}} for m in range(MODELS)]
    return parse_config({"name": "scale", "datasets": [{"name": "qa", "kind": "items_file",
                                                        "params": {"path": make_items(n_items)}}],
                         "models": models, "protocols": [{"name": "freeform", "conditions": CONDITIONS}],
                         "stats": {"bootstrap_resamples": 200}, "storage": {"root": root},
                         "ray": {"progress_bars": False, "decode_num_cpus": 0.25}})


RSS_AFTER: dict[str, float] = {}  # stage → the driver's peak RSS (MB) when it ended: where the peak was reached


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class MemorySampler(threading.Thread):
    """The driver's resident memory by kind, sampled every 0.2 s from /proc/self/status: the peak of RssAnon
    (what the process itself allocated) beside that of RssShmem (shared pages it touched: Ray's object store,
    mapped when the driver reads a block)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = {"RssAnon": 0.0, "RssShmem": 0.0, "VmRSS": 0.0}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                with open("/proc/self/status") as f:
                    for line in f:
                        k, _, v = line.partition(":")
                        if k in self.peak:
                            self.peak[k] = max(self.peak[k], int(v.split()[0]) / 1024)
            except OSError:
                return


def child_figures(out: subprocess.CompletedProcess, what: str) -> dict:
    """A child run's figures: its last JSON line (Ray may print a log line after it); exits saying why if none."""
    if out.returncode != 0:
        sys.exit(f"{what}: the run failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    figures = next((line for line in reversed(out.stdout.splitlines()) if line.startswith('{"requests"')), None)
    if figures is None:
        sys.exit(f"{what}: the run printed no figures:\n{out.stdout[-3000:]}")
    return json.loads(figures)


def timed(stages: dict[str, float], name: str, fn):
    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            return fn(*a, **kw)
        finally:
            stages[name] = stages.get(name, 0.0) + time.perf_counter() - t0
            RSS_AFTER[name] = peak_rss_mb()
    return wrapper


def timed_iter(stages: dict[str, float], name: str, fn):
    def wrapper(*a, **kw):
        t0 = time.perf_counter()
        try:
            yield from fn(*a, **kw)
        finally:
            stages[name] = stages.get(name, 0.0) + time.perf_counter() - t0
            RSS_AFTER[name] = peak_rss_mb()
    return wrapper


def one(n_requests: int, gpus: int, seconds_per_batch: float, batch_size: int) -> dict:
    """One run in this process; its figures."""
    from evalcore.core import cluster
    from evalcore.pipeline import run as run_mod
    n_items = n_requests // (MODELS * len(CONDITIONS))
    root = os.path.join(WORK, f"run-{n_requests}")
    busy = os.path.join(WORK, f"busy-{n_requests}")
    for d in (root, busy):
        shutil.rmtree(d, ignore_errors=True)
    cfg = config(n_items, root, busy, seconds_per_batch, batch_size)
    stages: dict[str, float] = {}
    run_mod.items_stage = timed(stages, "items", run_mod.items_stage)
    run_mod.plan_requests = timed(stages, "requests (counted)", run_mod.plan_requests)
    run_mod.judged_batches = timed_iter(stages, "ray_data (requests→decode→model→judge→score→commit)",
                                        run_mod.judged_batches)
    run_mod.account_for_all = timed(stages, "accounting", run_mod.account_for_all)
    run_mod.finish = timed(stages, "finish (scoring, tables, report)", run_mod.finish)
    t0 = time.perf_counter()
    cluster.start(None, num_cpus=2, resources={"sim_gpu": gpus}, log_to_driver=False, configure_logging=False,
                  _node_ip_address="127.0.0.1")
    stages["ray start"] = time.perf_counter() - t0
    RSS_AFTER["ray start"] = peak_rss_mb()
    sampler = MemorySampler()
    sampler.start()
    t_start = time.time()
    res = run_mod.run(cfg)
    t_end = time.time()
    sampler.stop.set()
    spans = []
    for name in os.listdir(busy):
        with open(os.path.join(busy, name)) as f:
            spans += [tuple(float(x) for x in line.split()) for line in f if line.strip()]
    first, last = min(s for s, _, _ in spans), max(e for _, e, _ in spans)
    busy_s = sum(e - s for s, e, _ in spans)
    wall = t_end - t_start
    return {"requests": res.counts["requests_in"], "scored": res.counts["requests_scored"], "wall_s": wall,
            "requests_per_s": res.counts["requests_in"] / wall,
            "driver_peak_rss_mb": peak_rss_mb(), "peak_rss_mb_after": dict(RSS_AFTER),
            "driver_peak_mb_by_kind": sampler.peak,
            "gpu_busy_fraction": busy_s / (gpus * (last - first)), "model_stage_s": last - first,
            "model_batches": len(spans), "batch_fill": sum(n for _, _, n in spans) / (len(spans) * batch_size),
            "last_answer_to_report_s": t_end - last, "stages_s": stages}


def report(rows: list[dict]) -> None:
    print(f"\n{'requests':>9} {'wall s':>8} {'req/s':>7} {'RSS MB':>7} {'GPU busy':>8} {'fill':>5} {'tail s':>7} "
          f"{'tail %':>6}  stages (s)")
    for r in rows:
        st = ", ".join(f"{k} {v:.1f}" for k, v in r["stages_s"].items())
        print(f"{r['requests']:>9} {r['wall_s']:>8.1f} {r['requests_per_s']:>7.1f} {r['driver_peak_rss_mb']:>7.0f} "
              f"{r['gpu_busy_fraction']:>8.0%} {r['batch_fill']:>5.0%} {r['last_answer_to_report_s']:>7.1f} "
              f"{r['last_answer_to_report_s'] / r['wall_s']:>6.0%}  {st}")
        print(f"{'':>9} driver peak (MB) by kind: "
              + ", ".join(f"{k} {v:.0f}" for k, v in r["driver_peak_mb_by_kind"].items()))
        print(f"{'':>9} driver peak RSS (MB) when each stage ended: "
              + ", ".join(f"{k} {v:.0f}" for k, v in r["peak_rss_mb_after"].items()))
    for a, b in zip(rows, rows[1:]):
        k = b["requests"] / a["requests"]
        print(f"{a['requests']} → {b['requests']} requests (×{k:.1f}): wall ×{b['wall_s'] / a['wall_s']:.2f}, "
              f"wall per request ×{(b['wall_s'] / b['requests']) / (a['wall_s'] / a['requests']):.2f}, "
              f"peak RSS ×{b['driver_peak_rss_mb'] / a['driver_peak_rss_mb']:.2f}, "
              f"tail ×{b['last_answer_to_report_s'] / a['last_answer_to_report_s']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--big", action="store_true", help="add 1,000,000 requests")
    ap.add_argument("--gpus", type=int, default=4, help="simulated GPUs (custom resource sim_gpu)")
    ap.add_argument("--seconds-per-batch", type=float, default=0.5,
                    help="simulated GPU time per batch (default 0.5: 4 GPUs ask for ~512 requests/s, more than a "
                         "2-core machine's CPU stages drain; 1.0 says whether the pipeline keeps GPUs fed)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one size, JSON on the last line
    a = ap.parse_args()
    if a.one:
        print(json.dumps(one(a.one, a.gpus, a.seconds_per_batch, a.batch_size)))
        return
    sizes = a.requests + ([1_000_000] if a.big else [])
    rows = []
    for n in sizes:
        cmd = [sys.executable, __file__, "--one", str(n), "--gpus", str(a.gpus), "--seconds-per-batch",
               str(a.seconds_per_batch), "--batch-size", str(a.batch_size)]
        rows.append(child_figures(subprocess.run(cmd, capture_output=True, text=True), f"{n} requests"))
        print(json.dumps(rows[-1]), flush=True)
    report(rows)


if __name__ == "__main__":
    main()
