"""MusicQA at scale: the weight-free baselines on real MusicQA text, one and four copies of EvalMusicQA.

EvalMusicQA.json (5,040 free-form questions on 560 recordings) with 560 synthesized 10 s clips standing for
its audio; ``dsp_listener`` and ``text_prior`` answer under ``correct`` and ``random``, and the default
``mullama`` lexical metrics (BLEU, BLEU-4, METEOR, ROUGE) score them: 20,160 requests per copy. ``--copies 1 4``
runs 20,160 and 80,640 requests (four copies as four datasets), one after the other, each in its own driver
process; ``--limit N`` takes the first N questions of each copy (a proportionally smaller case).

It prints, for each size, the wall, requests/s, the driver's peak RSS (and per 1,000 requests), when the model
stage started and when the first shard was committed after it, the time from the last model answer to the written
report, and the run's per-stage profile (run.json's ``profile``: Ray Data's operator stats and the driver's
stages); the bottleneck model (the one that sets the pace: its stage lasted longest): how busy its actors were over
its stage, how long they were starved (waited for input while work remained) and which upstream stage held them; then how each grows
from one size to the next (the run's wall and the whole command's, each size's driver process from its start to
its exit, against the requests ratio), with the load average before and after each run.

``--sim SECONDS`` replaces the two weight-free models by latency-bound simulated GPUs, one actor each holding one
custom ``sim_gpu`` resource (two on the cluster): ``listener`` a ``simulated_gpu`` that reads the audio (its
requests are decoded as dsp_listener's) and ``text-prior`` a ``simulated_gpu_text``, each sleeping SECONDS per
batch of 8; there the bottleneck's busy fraction is that of every simulated GPU actor of the slowest model.

    .venv/bin/python benchmarks/musicqa_scale.py [--musicqa ../shared/data/musicqa/EvalMusicQA.json] [--copies 1 4]
        [--limit N] [--ray KEY=VALUE] [--sim SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(HERE, "_work", "musicqa_scale")
MUSICQA = os.environ.get("EVALCORE_MUSICQA_JSON") or os.path.join(HERE, "..", "..", "shared", "data", "musicqa",
                                                                  "EvalMusicQA.json")


def make_audio(musicqa: str) -> str:
    """560 synthesized 10 s clips at 16 kHz named as EvalMusicQA's recordings (written once)."""
    import numpy as np
    import soundfile as sf

    d = os.path.join(WORK, "audio")
    os.makedirs(d, exist_ok=True)
    names = sorted({r["audio_name"] for r in json.load(open(musicqa))})
    t = np.arange(160_000) / 16_000
    for i, name in enumerate(names):
        p = os.path.join(d, name)
        if not os.path.exists(p):
            f = 110.0 * 2 ** ((i % 36) / 12)
            x = 0.2 * np.sin(2 * np.pi * f * t) * (0.6 + 0.4 * np.sin(2 * np.pi * (1 + i % 3) * t))
            sf.write(p, x.astype("float32"), 16_000)
    return d


def models(sim: float | None) -> list[dict]:
    """The two weight-free models, or (``sim``: seconds per batch) two simulated GPUs standing for them."""
    if sim is None:
        return [{"name": "listener", "kind": "dsp_listener"}, {"name": "text-prior", "kind": "text_prior"}]
    res = {"num_cpus": 0.1, "concurrency": 1, "custom": {"sim_gpu": 1}}
    return [{"name": "listener", "kind": "simulated_gpu", "params": {"seconds_per_batch": sim}, "resources": res},
            {"name": "text-prior", "kind": "simulated_gpu_text", "params": {"seconds_per_batch": sim},
             "resources": res}]


def config(musicqa: str, audio: str, copies: int, root: str, ray: dict | None = None, limit: int | None = None,
           sim: float | None = None):
    from evalcore.runconfig.config import parse_config

    params = {"path": musicqa, "audio_root": audio, **({"limit": limit} if limit else {})}
    return parse_config({
        "name": "musicqa-scale",
        "datasets": [{"name": f"musicqa{c}", "kind": "musicqa", "params": params} for c in range(copies)],
        "models": models(sim),
        "protocols": [{"name": "freeform", "conditions": ["correct", "random"]}],
        "storage": {"root": root}, "ray": {"progress_bars": False, "decode_num_cpus": 0.25, **(ray or {})}})


def bottleneck(profile: dict) -> tuple[str, dict] | None:
    """The model that sets the run's pace (:func:`evalcore.reports.run_profile.pace_setter`: its stage lasted
    longest), and its figures."""
    from evalcore.reports.run_profile import pace_setter

    models = profile.get("models") or {}
    name = pace_setter(models)
    return (name, models[name]) if name is not None else None


def one(musicqa: str, copies: int, ray: dict | None = None, limit: int | None = None,
        sim: float | None = None) -> dict:
    """One run in this process; its figures (from its run.json's profile)."""
    from evalcore.core import cluster
    from evalcore.pipeline import run as run_mod

    audio = make_audio(musicqa)
    root = os.path.join(WORK, f"run-{copies}")
    shutil.rmtree(root, ignore_errors=True)
    cfg = config(musicqa, audio, copies, root, ray, limit, sim)
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    cluster.start(None, num_cpus=2, log_to_driver=False, configure_logging=False, _node_ip_address="127.0.0.1",
                  **({"resources": {"sim_gpu": 2}} if sim is not None else {}))
    ray_start = time.perf_counter() - t0
    res = run_mod.run(cfg)
    profile = json.load(open(os.path.join(root, "run.json")))["profile"]
    models = [s for s in profile["stages"] if s["stage"].startswith("model:")]
    first = profile["first_commit"] or {}
    return {"requests": res.counts["requests_in"], "scored": res.counts["requests_scored"],
            "wall_s": profile["wall_s"], "ray_start_s": ray_start,
            "requests_per_s": res.counts["requests_in"] / profile["wall_s"],
            "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "model_start_s": first.get("model_start_s"), "first_commit_s": first.get("at_s"),
            "first_commit_after_model_start_s": first.get("after_model_start_s"),
            "last_answer_to_report_s": profile["wall_s"] - max(s["end_s"] for s in models),
            "load_before": load0, "load_after": os.getloadavg()[0], "profile": profile}


def print_run(r: dict) -> None:
    from evalcore.reports.console import profile_lines

    print(f"\n{r['requests']:,} requests: {r['wall_s']:.1f} s ({r['requests_per_s']:.1f} req/s), driver peak RSS "
          f"{r['driver_peak_rss_mb']:.0f} MB ({1000 * r['driver_peak_rss_mb'] / r['requests']:.1f} MB per 1,000 "
          f"requests), load average {r['load_before']:.1f} → {r['load_after']:.1f}")
    print(f"  model stage started at {r['model_start_s']:.1f} s; first shard committed "
          f"{r['first_commit_after_model_start_s']:.1f} s after it; last answer to report "
          f"{r['last_answer_to_report_s']:.1f} s ({r['last_answer_to_report_s'] / r['wall_s']:.0%})")
    b = bottleneck(r["profile"])
    if b:
        name, m = b
        print(f"  bottleneck model {name}: busy {m['busy_s']:.1f} s over {m['wall_s']:.1f} s × {m['actors']} actor(s) "
              f"= {m['busy_fraction']:.3f}; starved {m.get('starved_s', 0.0):.1f} s "
              f"({m.get('starved_fraction', 0.0):.1%}) held by {m.get('starved_by') or '–'}, meanwhile held back "
              f"{m.get('starved_held') or '–'}; its answers held by the stages after it "
              f"{m.get('output_held_s', 0.0):.1f} s; {m['answers_per_s']:.0f} answers/s; whole command "
              f"{r['command_s']:.1f} s")
    for line in profile_lines(r["profile"]):
        print("  " + line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--musicqa", default=MUSICQA, help="EvalMusicQA.json (default: ../shared/data/musicqa/ beside "
                                                       "the clone, or $EVALCORE_MUSICQA_JSON)")
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--limit", type=int, help="the first N questions of each copy (default: all 5,040)")
    ap.add_argument("--ray", action="append", default=[], metavar="KEY=VALUE",
                    help="a run config `ray:` setting to try, e.g. max_queued_blocks=1000 (JSON values)")
    ap.add_argument("--sim", type=float, metavar="SECONDS",
                    help="latency-bound simulated GPU models (SECONDS per batch of 8) in place of the weight-free ones")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one size, JSON on the last line
    a = ap.parse_args()
    sys.path.insert(0, HERE)
    from scale import child_figures

    ray = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in a.ray)}
    musicqa = os.path.abspath(a.musicqa)
    if a.one:
        print(json.dumps(one(musicqa, a.one, ray, a.limit, a.sim)))
        return
    rows = []
    for n in a.copies:
        cmd = [sys.executable, __file__, "--musicqa", musicqa, "--one", str(n), *(f"--ray={kv}" for kv in a.ray),
               *(["--limit", str(a.limit)] if a.limit else []), *(["--sim", str(a.sim)] if a.sim is not None else [])]
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        took = time.perf_counter() - t0
        rows.append({**child_figures(out, f"{n} copies"), "command_s": took})
        print_run(rows[-1])
    print()
    for n, r in zip(a.copies, rows):
        name, m = bottleneck(r["profile"]) or ("–", {})
        print(f"×{n}: {r['requests']:,} requests in {r['wall_s']:.1f} s (whole command {r['command_s']:.1f} s, load "
              f"average {r['load_before']:.1f} → {r['load_after']:.1f}); first shard committed "
              f"{r['first_commit_after_model_start_s']:.1f} s after the model stage started; bottleneck {name} busy "
              f"{m.get('busy_fraction', 0.0):.3f}, starved {m.get('starved_s', 0.0):.1f} s "
              f"(by {', '.join(m.get('starved_by') or {}) or '–'})")
    for (n, x), (m, y) in zip(zip(a.copies, rows), zip(a.copies[1:], rows[1:])):
        k = y["requests"] / x["requests"]
        print(f"×{n} → ×{m} ({k:.2f}× the requests): wall ×{y['wall_s'] / x['wall_s']:.2f}, wall per request "
              f"×{(y['wall_s'] / y['requests']) / (x['wall_s'] / x['requests']):.2f}, peak RSS "
              f"×{y['driver_peak_rss_mb'] / x['driver_peak_rss_mb']:.2f}, first commit after the model start "
              f"{x['first_commit_after_model_start_s']:.1f} s → {y['first_commit_after_model_start_s']:.1f} s; "
              f"whole command ×{y['command_s'] / x['command_s']:.2f}")


if __name__ == "__main__":
    main()
