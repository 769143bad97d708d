"""The model stage on two engines: ``hf_audio_lm`` (transformers ``generate``) against ``vllm_audio_lm`` (vLLM),
on the same checkpoint, requests and output lengths, as ratios measured in one run.

Each backend runs in a child process of its own interpreter (vLLM's venv for ``vllm_audio_lm``) through the model
stage's actor class itself (:class:`evalcore.pipeline.stages.ModelRunner`, fed decoded batches as the stream feeds
it, without Ray around it), one after the other, so they never share the machine. Output lengths are fixed
(transformers: ``min_new_tokens`` = ``max_new_tokens``; vLLM: ``ignore_eos``), so both generate the same number
of tokens whatever the random weights say. Figures per backend:

* ``load_s``: building the model (vLLM: engine start, KV-cache allocation, warm-up);
* ``first_answer_s``: from the first batch handed in to its answers coming back;
* ``answers_per_s`` and ``tokens_per_s`` over all batches (after the load);
* ``engine_busy``: the share of the model stage's time spent inside the backend's ``generate`` (the rest is the
  stage's own work: Arrow rows in and out, prompts, checks).

Checkpoints are random weights built here (:mod:`evalcore.models.tiny`): ``--shape tiny`` (the tests' tiny
Qwen2-Audio, head size 32) for CPUs; ``--shape 7b`` gives the config shape of Qwen2-Audio-7B's language model
(hidden 4096, 32 layers, 32 heads, MLP 11008, with its Whisper-large audio encoder) and the tiny tokenizer, for a
GPU: throughput does not depend on trained weights (the vocabulary, 350 tokens against 156k, makes its output
layer cheaper: say so when quoting it).

    .venv/bin/python benchmarks/engine_throughput.py                      # CPU, tiny: about 3 minutes
    .venv/bin/python benchmarks/engine_throughput.py --shape 7b --device cuda --requests 2000 --batch-size 256 \\
        --dtype bfloat16 --new-tokens 128                               # one GPU
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SR = 16_000
PROMPTS = ["Describe the music.", "What instruments are playing in this music clip? Answer briefly.",
           "What is the tempo and mood of this piece?", "Which genre is this? Answer in one word."]


def build(shape: str, out: str, dtype: str) -> str:
    """A random Qwen2-Audio checkpoint of the given config shape."""
    from evalcore.models.tiny import build_tiny

    if shape == "tiny":
        return build_tiny("qwen2_audio", out, head_dim=32)
    import torch
    import transformers as T

    from evalcore.models.tiny import tiny_tokenizer

    tk = tiny_tokenizer(["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"])
    fe = T.WhisperFeatureExtractor(feature_size=128, sampling_rate=SR, chunk_length=30)
    cfg = T.Qwen2AudioConfig(
        audio_config=dict(model_type="qwen2_audio_encoder", d_model=1280, encoder_layers=32,
                          encoder_attention_heads=20, encoder_ffn_dim=5120, num_mel_bins=128, max_source_positions=1500),
        text_config=dict(model_type="qwen2", hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=8192,
                         vocab_size=len(tk)),
        audio_token_index=tk.convert_tokens_to_ids("<|AUDIO|>"))
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = T.Qwen2AudioForConditionalGeneration(cfg).to(getattr(torch, dtype))
    model.generation_config.eos_token_id = tk.eos_token_id
    model.save_pretrained(out)
    T.Qwen2AudioProcessor(feature_extractor=fe, tokenizer=tk).save_pretrained(out)
    return out


def child(spec: dict) -> dict:
    """Run in the backend's interpreter: the model stage on ``spec``'s requests; its figures."""
    import numpy as np

    from evalcore.pipeline.stages import DECODED, ModelRunner, _table

    t0 = time.perf_counter()
    runner = ModelRunner(spec["kind"], spec["params"], (SR, spec["window"]))
    load_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    n, b, seconds = spec["requests"], spec["batch_size"], spec["seconds"]
    rows = [{"request_id": f"r{i}", "prompt": PROMPTS[i % len(PROMPTS)], "error": None,
             "audio": (0.3 * rng.standard_normal(int(seconds * SR))).astype(np.float32)} for i in range(n)]
    batches = [_table(rows[i:i + b], DECODED) for i in range(0, n, b)]
    inner = runner.model.generate
    in_engine = [0.0]

    def timed(batch):
        t = time.perf_counter()
        try:
            return inner(batch)
        finally:
            in_engine[0] += time.perf_counter() - t

    runner.model.generate = timed
    start = time.perf_counter()
    first = None
    answered = 0
    for batch in batches:
        out = runner(batch)
        first = first if first is not None else time.perf_counter() - start
        answered += out.num_rows - sum(1 for c in out.column("error_class").to_pylist() if c not in (None, "incomplete"))
    wall = time.perf_counter() - start
    return {"load_s": load_s, "first_answer_s": first, "wall_s": wall, "answers": answered,
            "answers_per_s": answered / wall, "tokens_per_s": answered * spec["params"]["max_new_tokens"] / wall,
            "engine_busy": in_engine[0] / wall, "info": json.loads(runner.info)}


def run_child(python: str, spec: dict, tmp: str) -> dict:
    path = Path(tmp) / f"{spec['kind']}.json"
    path.write_text(json.dumps(spec))
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "2",
           "PYTHONPATH": str(REPO)}
    p = subprocess.run([python, __file__, "--child", str(path)], capture_output=True, text=True, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("FIGURES ")]
    if p.returncode or not lines:
        sys.exit(f"{spec['kind']} failed:\n{p.stderr[-4000:]}")
    return json.loads(lines[-1].removeprefix("FIGURES "))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--shape", choices=("tiny", "7b"), default="tiny")
    ap.add_argument("--requests", type=int, default=192)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=10.0, help="audio per request (noise)")
    ap.add_argument("--device", default="cpu", help="hf_audio_lm's device (vLLM picks the GPU when there is one)")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, default=2048)
    a = ap.parse_args()
    if a.child:
        print("FIGURES " + json.dumps(child(json.loads(Path(a.child).read_text())), default=str), flush=True)
        return
    from evalcore.models.hf_audio import HFAudioLM
    from evalcore.models.vllm_audio import vllm_python

    vpy = vllm_python()
    if vpy is None:
        sys.exit("no Python with vLLM: bash scripts/build_vllm_venv.sh (or set EVALCORE_VLLM_PYTHON)")
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        ckpt = build(a.shape, str(Path(tmp) / "ckpt"), a.dtype)
        print(f"checkpoint ({a.shape}) built in {time.perf_counter() - t:.1f} s", flush=True)
        window = HFAudioLM.audio_spec({"checkpoint": ckpt})[1]
        common = {"checkpoint": ckpt, "max_new_tokens": a.new_tokens, "dtype": a.dtype}
        n = a.new_tokens
        specs = {
            "hf_audio_lm": {**common, "device": a.device, "generation": {"min_new_tokens": n}},
            "vllm_audio_lm": {**common, "max_model_len": a.max_model_len, "generation": {"ignore_eos": True}},
        }
        figures = {}
        for kind, params in specs.items():
            python = vpy if kind == "vllm_audio_lm" else sys.executable
            spec = {"kind": kind, "params": params, "window": window, "requests": a.requests,
                    "batch_size": a.batch_size, "seconds": a.seconds}
            figures[kind] = run_child(python, spec, tmp)
            f = figures[kind]
            print(f"{kind:14s} load {f['load_s']:6.1f} s | first answer {f['first_answer_s']:6.2f} s | "
                  f"{f['answers_per_s']:8.2f} answers/s | {f['tokens_per_s']:9.1f} tokens/s | "
                  f"engine busy {100 * f['engine_busy']:5.1f} % | {f['info'].get('device')}", flush=True)
    hf, vl = figures["hf_audio_lm"], figures["vllm_audio_lm"]
    ratios = {"answers_per_s": vl["answers_per_s"] / hf["answers_per_s"],
              "tokens_per_s": vl["tokens_per_s"] / hf["tokens_per_s"],
              "first_answer_s": vl["first_answer_s"] / hf["first_answer_s"]}
    print(f"vLLM / HF: answers/s ×{ratios['answers_per_s']:.2f}, tokens/s ×{ratios['tokens_per_s']:.2f}, "
          f"time to first answer ×{ratios['first_answer_s']:.2f} ({a.requests} requests of {a.seconds:g} s audio, "
          f"batches of {a.batch_size}, {a.new_tokens} new tokens each, shape {a.shape}, {a.dtype})")
    print(json.dumps({"shape": a.shape, "requests": a.requests, "batch_size": a.batch_size, "new_tokens": n,
                      "seconds": a.seconds, "dtype": a.dtype, "ratios": ratios,
                      "figures": {k: {x: y for x, y in v.items() if x != "info"} for k, v in figures.items()},
                      "devices": {k: v["info"].get("device") for k, v in figures.items()},
                      "vllm": vl["info"].get("vllm")}, default=str))


if __name__ == "__main__":
    main()
