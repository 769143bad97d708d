"""Pipeline overhead: items/s of the full pipeline with a null model vs a raw decode loop.

Both decode the same files to the same sample rate on this machine. The raw baselines are a
plain loop (1 process) and a process pool with as many workers as the pipeline gets CPUs.
Ray start-up is timed separately and excluded from the pipeline figure; the free-form answers are
scored with BLEU and ROUGE only (METEOR would add its one-off WordNet load, a metric cost).

    .venv/bin/python benchmarks/pipeline_overhead.py [--files 360] [--seconds 30] [--format mp3] [--decode-cpus 0.5]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import time

import numpy as np
import soundfile as sf

from evalcore import audio
from evalcore.config import parse_config
from evalcore.pipeline.run import run

WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_work")
TARGET_SR = 16_000


def make_files(n: int, seconds: float, fmt: str, sr: int = 44_100) -> list[str]:
    """n stereo clips (tones + noise) at 44.1 kHz, written once and reused."""
    d = os.path.join(WORK, f"audio-{fmt}-{seconds:g}s")
    os.makedirs(d, exist_ok=True)
    gen = np.random.default_rng(0)
    t = np.arange(int(seconds * sr)) / sr
    paths = []
    for i in range(n):
        p = os.path.join(d, f"clip{i:04d}.{fmt}")
        if not os.path.exists(p):
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
    ap.add_argument("--files", type=int, default=360)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--format", default="mp3", choices=["mp3", "wav", "flac"])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--decode-cpus", type=float, default=0.5, help="CPUs reserved per decode task (config ray.decode_num_cpus)")
    args = ap.parse_args()

    import ray

    paths = make_files(args.files, args.seconds, args.format)
    t0 = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    ray_start = time.perf_counter() - t0
    cpus = int(ray.cluster_resources().get("CPU", 1))

    loop = raw_loop(paths)
    pool = raw_pool(paths, cpus)
    pipe, counts = pipeline(paths, args.batch_size, args.decode_cpus)
    assert counts["requests_scored"] == len(paths), counts

    print(f"files: {len(paths)} × {args.seconds:g} s {args.format} 44.1 kHz stereo → {TARGET_SR} Hz mono; "
          f"CPUs: {cpus}; ray.init: {ray_start:.1f} s (excluded)")
    print(f"raw decode, 1 process      : {loop:7.2f} items/s")
    print(f"raw decode, {cpus} processes    : {pool:7.2f} items/s")
    print(f"pipeline (null model)      : {pipe:7.2f} items/s  (whole run: items, requests, Ray stages, tables, report)")
    print(f"ratio pipeline / raw {cpus}-proc : {pipe / pool:.2f}×   (goal ≥ 0.8×)")
    print(f"ratio pipeline / raw 1-proc : {pipe / loop:.2f}×")


if __name__ == "__main__":
    main()
