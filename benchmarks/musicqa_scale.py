"""MusicQA at scale: the weight-free baselines on real MusicQA text, one and four copies of EvalMusicQA.

EvalMusicQA.json (5,040 free-form questions on 560 recordings) with 560 synthesized 10 s clips standing for
its audio; ``dsp_listener`` and ``text_prior`` answer under ``correct`` and ``random``, and the default
``mullama`` lexical metrics (BLEU, BLEU-4, METEOR, ROUGE) score them: 20,160 requests per copy. ``--copies 1 4``
runs 20,160 and 80,640 requests (four copies as four datasets), one after the other, each in its own driver
process, and prints wall time, requests/s, the driver's peak RSS, the time from the last model answer to the
written report (its share of the wall) and time per stage; then how they grow.

Model answers are timed in the model actors themselves: a Ray worker setup hook (this module's
:func:`log_answers`) wraps the model stage and logs each batch's end time.

    .venv/bin/python benchmarks/musicqa_scale.py --musicqa ../shared/data/musicqa/EvalMusicQA.json [--copies 1 4]
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
LOG_ENV = "EVALCORE_BENCH_ANSWER_LOG"


def log_answers() -> None:
    """Ray worker setup hook: every model batch appends its end time to ``$EVALCORE_BENCH_ANSWER_LOG/<pid>``."""
    from evalcore.pipeline import stages

    call = stages.ModelRunner.__call__

    def timed(self, batch):
        out = call(self, batch)
        with open(os.path.join(os.environ[LOG_ENV], str(os.getpid())), "a") as f:
            f.write(f"{time.time()}\n")
        return out

    stages.ModelRunner.__call__ = timed


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


def config(musicqa: str, audio: str, copies: int, root: str, ray: dict | None = None):
    from evalcore.config import parse_config

    return parse_config({
        "name": "musicqa-scale",
        "datasets": [{"name": f"musicqa{c}", "kind": "musicqa", "params": {"path": musicqa, "audio_root": audio}}
                     for c in range(copies)],
        "models": [{"name": "listener", "kind": "dsp_listener"}, {"name": "text-prior", "kind": "text_prior"}],
        "protocols": [{"name": "freeform", "conditions": ["correct", "random"]}],
        "storage": {"root": root}, "ray": {"progress_bars": False, "decode_num_cpus": 0.5, **(ray or {})}})


def one(musicqa: str, copies: int, ray: dict | None = None) -> dict:
    """One run in this process; its figures."""
    sys.path.insert(0, HERE)
    from scale import timed, timed_iter

    from evalcore import cluster
    from evalcore.pipeline import run as run_mod

    audio = make_audio(musicqa)
    root, answers = os.path.join(WORK, f"run-{copies}"), os.path.join(WORK, f"answers-{copies}")
    for d in (root, answers):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(answers)
    os.environ[LOG_ENV] = answers
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")])
    cfg = config(musicqa, audio, copies, root, ray)
    stages: dict[str, float] = {}
    run_mod.items_stage = timed(stages, "items", run_mod.items_stage)
    run_mod.plan_requests = timed(stages, "requests (counted)", run_mod.plan_requests)
    run_mod.judged_batches = timed_iter(stages, "ray_data", run_mod.judged_batches)
    run_mod.finish = timed(stages, "finish (tables, report)", run_mod.finish)
    t0 = time.perf_counter()
    cluster.start(None, num_cpus=2, log_to_driver=False, configure_logging=False, _node_ip_address="127.0.0.1",
                  runtime_env={"worker_process_setup_hook": "musicqa_scale.log_answers"})
    stages["ray start"] = time.perf_counter() - t0
    t_start = time.time()
    res = run_mod.run(cfg)
    t_end = time.time()
    last = max(float(line) for name in os.listdir(answers) for line in open(os.path.join(answers, name)) if line.strip())
    wall = t_end - t_start
    return {"requests": res.counts["requests_in"], "scored": res.counts["requests_scored"], "wall_s": wall,
            "requests_per_s": res.counts["requests_in"] / wall,
            "driver_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "last_answer_to_report_s": t_end - last, "stages_s": stages}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--musicqa", required=True, help="EvalMusicQA.json")
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--ray", action="append", default=[], metavar="KEY=VALUE",
                    help="a run config `ray:` setting to try, e.g. max_queued_blocks=1000 (JSON values)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child: one size, JSON on the last line
    a = ap.parse_args()
    sys.path.insert(0, HERE)
    from scale import child_figures

    ray = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in a.ray)}
    if a.one:
        print(json.dumps(one(os.path.abspath(a.musicqa), a.one, ray)))
        return
    rows = []
    for n in a.copies:
        out = subprocess.run([sys.executable, __file__, "--musicqa", a.musicqa, "--one", str(n),
                              *(f"--ray={kv}" for kv in a.ray)], capture_output=True, text=True)
        rows.append(child_figures(out, f"{n} copies"))
        print(json.dumps(rows[-1]), flush=True)
    print(f"\n{'requests':>9} {'wall s':>8} {'req/s':>7} {'RSS MB':>7} {'tail s':>7} {'tail %':>6}  stages (s)")
    for r in rows:
        st = ", ".join(f"{k} {v:.1f}" for k, v in r["stages_s"].items())
        print(f"{r['requests']:>9} {r['wall_s']:>8.1f} {r['requests_per_s']:>7.1f} {r['driver_peak_rss_mb']:>7.0f} "
              f"{r['last_answer_to_report_s']:>7.1f} {r['last_answer_to_report_s'] / r['wall_s']:>6.0%}  {st}")
    for x, y in zip(rows, rows[1:]):
        print(f"{x['requests']} → {y['requests']} requests (×{y['requests'] / x['requests']:.1f}): "
              f"wall ×{y['wall_s'] / x['wall_s']:.2f}, peak RSS ×{y['driver_peak_rss_mb'] / x['driver_peak_rss_mb']:.2f}")


if __name__ == "__main__":
    main()
