"""Runs under the vLLM interpreter (``.venv-vllm/bin/python``) for ``tests/test_models_vllm_audio.py``.

``python vllm_worker.py SPEC.json`` builds the model stage's actor class (:class:`ModelRunner`) around a
``vllm_audio_lm`` on the CPU engine, answers :func:`requests` with it, and prints one ``RESULT {json}`` line:
the answers (:func:`answer_view`), and with ``drop`` set, the rows of a batch whose request ``drop`` lost its
audio between evalcore and the engine (injected here, as lmms-eval's vLLM path loses it); with ``short`` (sample counts),
the answers to clips that long.
"""

from __future__ import annotations

import json
import sys

import numpy as np

SR = 16_000
PROMPTS = ["Describe the music.", "What instruments are playing in this music clip? Answer briefly.", "Hi",
           "Describe the music in one sentence.", "What instruments?", "The answer is guitar.", "Is it fast?",
           "Name the genre."]
SECONDS = [None, 0.4, 1.0, 3.0, 7.5, 12.0]


def requests(n: int = 24, seed: int = 0) -> list:
    """``n`` requests mixing audio lengths (0.4–12 s of noise, and none) and prompts of 1–12 words."""
    from evalcore.models.base import AudioPrompt

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = SECONDS[i % len(SECONDS)]
        x = None if s is None else (0.3 * rng.standard_normal(int(s * SR))).astype(np.float32)
        out.append(AudioPrompt(x, SR, PROMPTS[i % len(PROMPTS)]))
    return out


def short_requests(lengths: list) -> list:
    """One request per clip length (samples at 16 kHz) of seeded noise."""
    from evalcore.models.base import AudioPrompt

    rng = np.random.default_rng(1)
    return [AudioPrompt((0.3 * rng.standard_normal(n)).astype(np.float32), SR, "Describe the music.") for n in lengths]


def main(spec_path: str) -> None:
    import dataclasses

    import vllm

    from evalcore.models.audio_chat import answer_view
    from evalcore.models.vllm_audio import ENGINE_ARGS, SAMPLING
    from evalcore.pipeline.stages import DECODED, ModelRunner, _table

    spec = json.loads(open(spec_path).read())
    runner = ModelRunner("vllm_audio_lm", spec["params"], (SR, spec["window"]))
    model = runner.model
    batch = requests(spec.get("n", 24))
    result: dict = {"answers": [answer_view(a) for a in model.generate(batch)], "info": json.loads(runner.info),
                    "unknown_engine_args": sorted(ENGINE_ARGS - {f.name for f in dataclasses.fields(vllm.EngineArgs)}),
                    "unknown_sampling": sorted(SAMPLING - set(vllm.SamplingParams.__struct_fields__))}
    if spec.get("short"):  # clips of these many samples: at and below the family's minimum
        result["short"] = [answer_view(a) for a in model.generate(short_requests(spec["short"]))]
    drop = spec.get("drop")
    if drop is not None:
        send = model.engine_prompts

        def losing(b):  # the fault: request `drop` reaches the engine without its audio
            prompts = send(b)
            prompts[drop].pop("multi_modal_data", None)
            return prompts

        model.engine_prompts = losing
        rows = [{"request_id": f"r{i}", "prompt": inp.prompt, "error": None, "audio": inp.audio}
                for i, inp in enumerate(batch)]
        out = runner(_table(rows, DECODED)).to_pylist()
        result["dropped"] = [{k: r[k] for k in ("request_id", "text", "error", "error_class", "error_stage")}
                             for r in out]
    print("RESULT " + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
