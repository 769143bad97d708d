"""What each listening control costs beside the correct audio: requests, the models' and the decode stage's seconds,
and the run's wall time, relative to ``correct``.

Real runs on a local Ray (started before the clock starts) of the demo's multiple-choice protocol over a synthetic
dataset of ``--clips`` clips (``--seconds`` long), both weight-free models (the DSP listener and the text prior), two
option orders. First a describer run (the listener describes each clip: the ``caption`` condition's descriptions,
``captions:``); then, ``--repeats`` times each, interleaved, a run of ``correct`` alone (the baseline) and one of
``correct`` plus each control: ``random``, ``silence``, ``noise``, ``text_only``, the segments ``first_25`` and
``window_2s``, ``caption``, and ``paraphrase_1`` (its paraphraser: the scripted OpenAI-compatible server of
tests/llm_server.py on 127.0.0.1, a fresh cache each run, so every paraphrase is asked; its calls are counted). Printed per control: its requests, the seconds the decode stage and the models spent on
them (``decode_s``, ``generate_s`` summed over its responses) per request against ``correct``'s, and what it adds to
the run's wall time (median over the repeats, minus the baseline's median, over the baseline's).

    .venv/bin/python benchmarks/control_costs.py [--clips 24] [--seconds 8] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

import pandas as pd

from evalcore.core import storage
from evalcore.pipeline.graph import init_ray
from evalcore.pipeline.run import run
from evalcore.runconfig.config import parse_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key  # noqa: E402

CONTROLS = ("random", "silence", "noise", "text_only", "first_25", "window_2s", "caption", "paraphrase_1")
MODELS = [{"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 16}},
          {"name": "text-prior", "kind": "text_prior", "resources": {"num_cpus": 0.25, "batch_size": 16}}]


def paraphrase(messages: list[dict]) -> str:
    """A scripted paraphraser: the question and each option with a prefix (JSON, as the paraphrase stage asks)."""
    text = messages[-1]["content"]
    question = re.search(r"^Question: (.*)$", text, re.MULTILINE).group(1)
    return json.dumps({"question": f"Put another way: {question}",
                       "options": [f"{o}, so to speak" for o in re.findall(r"^\d+\. (.*)$", text, re.MULTILINE)]})


def config(root: str, conditions: list[str], clips: int, seconds: float, captions: str | None,
           protocol: dict | None = None, paraphraser: str | None = None):
    dataset = {"name": "synth", "kind": "synthetic", "params": {"n_clips": clips, "seconds": seconds, "seed": 0,
                                                                 "bad_clips": 0}}
    return parse_config({
        "name": "control-costs", "datasets": [dataset], "models": MODELS,
        "protocols": [protocol or {"name": "mcq", "conditions": conditions, "option_orders": 2}],
        "captions": {"run": captions, "model": "listener"} if captions else None,
        "paraphraser": {"params": {"base_url": paraphraser, "model": "scripted", "rpm": 600_000, "tpm": 10**9,
                                   "api_key_env": TEST_API_KEY_ENV}} if paraphraser else None,
        "storage": {"root": root}, "stats": {"bootstrap_resamples": 200},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5}})


def timed(cfg) -> tuple[float, pd.DataFrame]:
    t0 = time.perf_counter()
    result = run(cfg)
    wall = time.perf_counter() - t0
    return wall, storage.read_parquet(storage.join(result.root, "responses")).to_pandas()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clips", type=int, default=24)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    install_test_key()
    srv = LLMServer(answer=paraphrase).__enter__()
    init_ray(parse_config({"name": "x", "datasets": [{"name": "d", "kind": "synthetic"}], "models": MODELS,
                           "protocols": [{"name": "mcq"}], "ray": {"progress_bars": False}}).ray)
    work = tempfile.mkdtemp(prefix="control-costs-")
    describer = config(f"{work}/describe", ["correct"], args.clips, args.seconds, None,
                       {"name": "freeform", "conditions": ["correct"], "models": ["listener"]})
    run(describer)
    walls: dict[str, list[float]] = {}
    responses: dict[str, pd.DataFrame] = {}
    for r in range(args.repeats):
        for name in ("correct", *CONTROLS):
            conds = ["correct"] if name == "correct" else ["correct", name]
            wall, resp = timed(config(f"{work}/{name}-{r}", conds, args.clips, args.seconds, describer.root,
                                      paraphraser=srv.base_url if name.startswith("paraphrase") else None))
            walls.setdefault(name, []).append(wall)
            responses[name] = resp
    base = responses["correct"]
    base_n = len(base)
    base_work = (base["decode_s"].sum() + base["generate_s"].sum()) / base_n
    base_wall = statistics.median(walls["correct"])
    print(f"{args.clips} clips of {args.seconds:g} s, mcq (3 questions a clip, 2 option orders), 2 models; "
          f"median of {args.repeats} runs each")
    print(f"correct: {base_n} requests, decode+model {1000 * base_work:.2f} ms/request, run wall {base_wall:.1f} s")
    print(f"{'control':<12} {'requests':>8} {'decode+model per request':>26} {'adds to the wall':>18}")
    for name in CONTROLS:
        resp = responses[name]
        mine = resp[resp["condition"] == name]
        per = (mine["decode_s"].sum() + mine["generate_s"].sum()) / max(len(mine), 1)
        added = statistics.median(walls[name]) - base_wall
        print(f"{name:<12} {len(mine):>8} {1000 * per:>12.2f} ms ({per / base_work:>5.2f}×) "
              f"{added:>+8.1f} s ({added / base_wall:>+5.0%})")
    calls = sum(1 for r in srv.requests if "chat/completions" in r.path)
    print(f"paraphrase_1: {calls} paraphraser calls over {args.repeats} runs ({calls // max(args.repeats, 1)} a run: "
          "one per distinct question and its options)")
    srv.__exit__(None, None, None)


if __name__ == "__main__":
    main()
