"""A simulated GPU model, for scale benchmarks: a fixed time per batch and a templated answer.

``simulated_gpu`` sleeps ``seconds_per_batch`` per batch, as a GPU model's forward pass takes about
the same time whatever the batch holds, and answers every input with ``answer`` formatted with
``{prompt}`` (the request's prompt) and ``{seconds}`` (the audio's length, 1 decimal). Give its
actors a custom Ray resource standing for a GPU in the model's ``resources.custom`` (e.g.
``{sim_gpu: 1}``, on a cluster started with ``resources={"sim_gpu": 4}``), so the pipeline places
them as it would GPU actors. ``simulated_gpu_text`` is the same model without audio: its requests
are not decoded (a run measures the pipeline, not decode).

``decode_seconds_per_batch`` (default 0) makes the decode stage of the model's requests take that much longer per
batch of the model's ``batch_size`` requests, as a model whose inputs are costly to prepare on CPUs (feature
extraction before a GPU): the pipeline reads it without building the model (:meth:`SimulatedGPU.decode_seconds`); a test or benchmark starves the model
with it on purpose.

``busy_log`` (a local directory, optional): each actor appends one line per batch,
``start end size`` (``time.time()`` seconds), to its own file there, named after its Ray node and
process (``actor-<node>-<pid>-…``), from which a benchmark computes how busy the simulated GPUs were,
in all and per node.
"""

from __future__ import annotations

import os
import string
import time
from typing import Annotated, Any, Sequence

from pydantic import AfterValidator, Field

from evalcore.models.base import MODELS, AudioPrompt, MusicLM

_FIELDS = {"prompt", "seconds"}


def check_template(answer: str) -> str:
    """``answer`` if it names only ``{prompt}`` and ``{seconds}``; raises ``ValueError`` otherwise."""
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(answer) if f is not None}
    except ValueError as e:
        raise ValueError(f"not a valid template ({e})") from None
    if names - _FIELDS:
        raise ValueError(f"unknown placeholder(s) {sorted(names - _FIELDS)}; known: prompt, seconds")
    return answer


def _node() -> str:
    """The first 12 hex digits of this process's Ray node id ("local" outside Ray)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id()[:12] if ray.is_initialized() else "local"
    except Exception:  # noqa: BLE001 - a name for a log file, nothing more
        return "local"


@MODELS.register("simulated_gpu")
class SimulatedGPU(MusicLM):
    """Sleeps ``seconds_per_batch`` per batch; answers ``answer`` (a template) to every input."""

    def __init__(self, seconds_per_batch: Annotated[float, Field(ge=0)] = 0.1,
                 answer: Annotated[str, AfterValidator(check_template)] = "A piece of music with {seconds} s of audio.",
                 busy_log: str | None = None, sample_rate: Annotated[int, Field(gt=0)] = 16_000,
                 max_audio_seconds: Annotated[float, Field(gt=0)] | None = None,
                 decode_seconds_per_batch: Annotated[float, Field(ge=0)] = 0.0) -> None:
        if not seconds_per_batch >= 0:
            raise ValueError(f"seconds_per_batch: must be >= 0, got {seconds_per_batch}")
        self.seconds_per_batch = float(seconds_per_batch)
        self.template = check_template(answer)
        self.sample_rate = sample_rate
        self.max_audio_seconds = max_audio_seconds
        self.log = None
        if busy_log:
            os.makedirs(busy_log, exist_ok=True)
            name = f"actor-{_node()}-{os.getpid()}-{id(self):x}.log"
            self.log = open(os.path.join(busy_log, name), "a", buffering=1)

    @classmethod
    def decode_seconds(cls, params: dict[str, Any]) -> float:
        """Seconds a decode task sleeps per batch of this model's requests (``decode_seconds_per_batch``), without
        building it."""
        return float(params.get("decode_seconds_per_batch", 0.0))

    def info(self) -> dict[str, Any]:
        return {**super().info(), "checkpoint": "simulated", "seconds_per_batch": self.seconds_per_batch}

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str]:
        start = time.time()
        time.sleep(self.seconds_per_batch)
        out = [self.template.format(prompt=inp.prompt,
                                    seconds=f"{0.0 if inp.audio is None else len(inp.audio) / inp.sample_rate:.1f}")
               for inp in batch]
        if self.log is not None:
            self.log.write(f"{start:.6f} {time.time():.6f} {len(batch)}\n")
        return out


@MODELS.register("simulated_gpu_text")
class SimulatedGPUText(SimulatedGPU):
    """:class:`SimulatedGPU` without audio: its requests are not decoded."""

    uses_audio = False
