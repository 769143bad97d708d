"""Pipeline overhead: items/s of the full pipeline with a null model vs a raw decode loop.

Both decode the same files to the same sample rate on this machine. The raw baselines are a
plain loop (1 process) and a process pool with as many workers as the pipeline gets CPUs.
Ray start-up is timed separately and excluded from the pipeline figure; the free-form answers are
scored with BLEU and ROUGE only (METEOR would add its one-off WordNet load, a metric cost).

    .venv/bin/python benchmarks/pipeline_overhead.py [--files 360 3600] [--seconds 30] [--format mp3] [--decode-cpus 0.5]

With several ``--files`` sizes, each is measured in turn on the same Ray (started once). Each size also prints
where the pipeline's time went: items, counting the requests, Ray Data until its first judged batch (start-up,
planning, actors, the first decode), the rest of the stream, and the tables and report.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import time

import numpy as np
import soundfile as sf

from evalcore.core import audio
from evalcore.runconfig.config import parse_config
from evalcore.pipeline.run import run

WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_work")
TARGET_SR = 16_000


DISTINCT = 360  # clips encoded; beyond that, byte copies under new names (decoding them is the same work)
LOOP_FILES = 360  # the 1-process loop's rate is taken over this many files


def make_files(n: int, seconds: float, fmt: str, sr: int = 44_100) -> list[str]:
    """n stereo clips (tones + noise) at 44.1 kHz, written once and reused: the first DISTINCT encoded, the
    rest copies of them under their own names (no stage can tell them apart or share their decode)."""
    d = os.path.join(WORK, f"audio-{fmt}-{seconds:g}s")
    os.makedirs(d, exist_ok=True)
    gen = np.random.default_rng(0)
    t = np.arange(int(seconds * sr)) / sr
    paths = []
    for i in range(n):
        p = os.path.join(d, f"clip{i:04d}.{fmt}")
        if not os.path.exists(p):
            if i >= DISTINCT:
                shutil.copyfile(paths[i % DISTINCT], p)
            else:
                f0 = 110 * 2 ** (i % 24 / 12)
                x = 0.3 * np.sin(2 * np.pi * f0 * t) + 0.05 * gen.standard_normal(t.size)
                sf.write(p, np.stack([x, np.roll(x, 7)], axis=1).astype(np.float32), sr, format=fmt.upper())
        paths.append(p)
    return paths


def _load(p: str) -> int:
    return len(audio.load(p, TARGET_SR))


def raw_loop(paths: list[str]) -> float:
    t0 = time.perf_counter()
    for p in paths:
        _load(p)
    return len(paths) / (time.perf_counter() - t0)


def raw_pool(paths: list[str], workers: int) -> float:
    with mp.get_context("spawn").Pool(workers) as pool:
        pool.map(_load, paths[:workers])  # warm the workers' imports
        t0 = time.perf_counter()
        pool.map(_load, paths, chunksize=4)
        return len(paths) / (time.perf_counter() - t0)


def stage_timers(stages: dict[str, float]) -> None:
    """Time the run's stages into ``stages`` (this process's copy of the pipeline module)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from scale import timed

    from evalcore.pipeline import run as run_mod

    def streamed(fn):
        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            first = None
            for batch in fn(*a, **kw):
                if first is None:
                    first = stages["ray_data: to the first judged batch"] = time.perf_counter() - t0
                yield batch
            stages["ray_data: the rest"] = time.perf_counter() - t0 - (first or 0.0)
        return wrapper

    run_mod.items_stage = timed(stages, "items", run_mod.items_stage)
    run_mod.plan_requests = timed(stages, "requests (counted)", run_mod.plan_requests)
    run_mod.judged_batches = streamed(run_mod.judged_batches)
    run_mod.finish = timed(stages, "finish (tables, report)", run_mod.finish)


def pipeline(paths: list[str], batch_size: int, decode_cpus: float) -> tuple[float, dict]:
    items = os.path.join(WORK, "items.jsonl")
    with open(items, "w") as f:
        for i, p in enumerate(paths):
            f.write(json.dumps({"item_id": f"i{i}", "protocol": "freeform", "audio_uri": p,
                                "question": "Describe the music.", "reference": "a tone"}) + "\n")
    root = os.path.join(WORK, "run")
    shutil.rmtree(root, ignore_errors=True)
    cfg = parse_config({
        "name": "overhead",
        "datasets": [{"name": "bench", "kind": "items_file", "params": {"path": items}}],
        "models": [{"name": "null", "kind": "null", "params": {"sample_rate": TARGET_SR},
                    "resources": {"num_cpus": 0.25, "batch_size": batch_size}}],
        # cheap metrics: METEOR's WordNet load (~4 s, once per run) is a metric cost, not pipeline overhead
        "protocols": [{"name": "freeform", "conditions": ["correct"], "metrics": {"names": ["bleu", "rouge"]}}],
        "storage": {"root": root}, "ray": {"progress_bars": False, "decode_num_cpus": decode_cpus},
        "stats": {"bootstrap_resamples": 100},
    })
    t0 = time.perf_counter()
    res = run(cfg)
    return len(paths) / (time.perf_counter() - t0), res.counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, nargs="+", default=[360])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--format", default="mp3", choices=["mp3", "wav", "flac"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--decode-cpus", type=float, default=0.5, help="CPUs reserved per decode task (config ray.decode_num_cpus)")
    args = ap.parse_args()

    import ray

    every = make_files(max(args.files), args.seconds, args.format)
    t0 = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_start = time.perf_counter() - t0
    cpus = int(ray.cluster_resources().get("CPU", 1))
    loop = raw_loop(every[:LOOP_FILES])
    print(f"{args.seconds:g} s {args.format} 44.1 kHz stereo → {TARGET_SR} Hz mono; CPUs: {cpus}; "
          f"ray.init: {ray_start:.1f} s (excluded); raw decode, 1 process: {loop:.2f} items/s")
    stages: dict[str, float] = {}
    stage_timers(stages)
    for n in args.files:
        paths = every[:n]
        pool = raw_pool(paths, cpus)
        stages.clear()
        pipe, counts = pipeline(paths, args.batch_size, args.decode_cpus)
        assert counts["requests_scored"] == len(paths), counts
        print(f"{n} files: raw decode, {cpus} processes {pool:.2f} items/s; pipeline (null model, whole run: items, "
              f"requests, Ray stages, tables, report) {pipe:.2f} items/s; ratio pipeline / raw {cpus}-proc "
              f"{pipe / pool:.2f}× (goal ≥ 0.8×), pipeline / raw 1-proc {pipe / loop:.2f}×", flush=True)
        print("    stages (s): " + ", ".join(f"{k} {v:.1f}" for k, v in stages.items()), flush=True)


if __name__ == "__main__":
    main()
