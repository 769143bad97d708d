"""What the pipeline's stages ask of the cluster: models' audio specs, decode memory, aligned blocks, which models
fit together, and the CPUs and GPUs of the scoring and commit stages. Plain arithmetic over the settings it is
given: nothing here starts Ray."""

from __future__ import annotations

import logging

from evalcore.runconfig.config import ModelConfig, RunConfig
from evalcore.models.base import MODELS
from evalcore.pipeline.stream_metrics import ModelMetricsActor

log = logging.getLogger("evalcore")


def audio_spec(model: ModelConfig) -> tuple[int, float | None]:
    """(sample rate, longest window in s) of a model, from its params or its class defaults."""
    cls = MODELS.get(model.kind)
    if callable(getattr(cls, "audio_spec", None)):  # MusicLM.audio_spec: params, class defaults or the checkpoint
        return cls.audio_spec(dict(model.params))
    sr = int(model.params.get("sample_rate", getattr(cls, "sample_rate", 16_000)))
    window = model.params.get("max_audio_seconds", getattr(cls, "max_audio_seconds", None))
    return sr, (float(window) if window is not None else None)


def uses_audio(model: ModelConfig) -> bool:
    """Whether a model reads audio (its class's ``MusicLM.uses_audio``), without building it."""
    return bool(getattr(MODELS.get(model.kind), "uses_audio", True))


def decode_seconds(model: ModelConfig) -> float:
    """Seconds a decode task spends beyond decoding per batch of the model's requests: a simulated model's
    ``decode_seconds_per_batch`` (:meth:`evalcore.models.simulated.SimulatedGPU.decode_seconds`), else 0."""
    hook = getattr(MODELS.get(model.kind), "decode_seconds", None)
    return float(hook(dict(model.params))) if callable(hook) else 0.0


def model_groups(models: list[ModelConfig], cpus: float, gpus: float,
                 custom: dict[str, float] | None = None) -> list[list[ModelConfig]]:
    """Models whose actor pools fit on the cluster together (keeping one CPU for decode/judge tasks);
    ``custom``: the cluster's custom resources that models ask for (``resources.custom``)."""
    custom = custom or {}
    groups: list[list[ModelConfig]] = []
    cur: list[ModelConfig] = []
    used_c = used_g = 0.0
    used_x: dict[str, float] = {}
    for m in models:
        c = m.resources.num_cpus * m.resources.concurrency
        g = m.resources.num_gpus * m.resources.concurrency
        x = {k: v * m.resources.concurrency for k, v in m.resources.custom.items()}
        if c > cpus or g > gpus or any(v > custom.get(k, 0.0) for k, v in x.items()):
            # waits for an autoscaler to add nodes, or forever on a fixed cluster
            log.warning("model %r asks for %g CPU / %g GPU%s (resources × concurrency) but the cluster has "
                        "%g CPU / %g GPU%s now", m.name, c, g, "".join(f" / {v:g} {k}" for k, v in x.items()),
                        cpus, gpus, "".join(f" / {custom.get(k, 0.0):g} {k}" for k in x))
        if cur and (used_c + c > max(cpus - 1, 0) or used_g + g > gpus
                    or any(used_x.get(k, 0.0) + v > custom.get(k, 0.0) for k, v in x.items())):
            groups.append(cur)
            cur, used_c, used_g, used_x = [], 0.0, 0.0, {}
        cur.append(m)
        used_c += c
        used_g += g
        for k, v in x.items():
            used_x[k] = used_x.get(k, 0.0) + v
    return groups + ([cur] if cur else [])


SOURCE_RATE, SOURCE_CHANNELS = 48_000, 2  # what a decode holds before downmix and resampling, at most as a rule


def decode_memory(batch_size: int, sample_rate: int, window_s: float | None) -> int:
    """Bytes a decode task reserves: a worker (~384 MiB with its imports) plus a model batch of float32 audio (30 s
    per item when unbounded) as decoded (48 kHz stereo) and twice at the model's rate (downmix/resample copies).
    Ray Data warns when a task outgrows it: 30 s MP3s in batches of 8 took 480 MiB against 315 reserved. A task
    decodes a whole aligned block, one file at a time, and keeps each distinct sound once (a block of 1,024
    MusicQA requests: 57 clips, 36 MB)."""
    seconds = window_s if window_s is not None else 30.0
    decoded = SOURCE_RATE * SOURCE_CHANNELS + 2 * sample_rate
    return (384 << 20) + int(batch_size * seconds * decoded * 4)



def chunk_window(model: ModelConfig, window: float | None) -> float | None:
    """Seconds per decoded chunk: the model's window, or ``chunk_seconds`` when shorter (or no window)."""
    if model.chunk_seconds is None:
        return window
    return model.chunk_seconds if window is None else min(window, model.chunk_seconds)



#: requests per block after the batch alignment at most, about (a whole number of the model's batches): a decode
#: task takes a block, so blocks of one batch each cost a task per batch (MusicQA's 20,160 requests in batches of 8
#: on 2 CPUs: 378 s, against 135 s before the alignment), and each block costs the model's actor a task of its own
#: (Ray's dispatch, the block's transfer: tens of ms on 2 busy cores, a tenth of a weight-free model's time for 256
#: requests). A block holds each distinct sound once (:func:`evalcore.pipeline.stages.decode_batch`): 1,024 MusicQA
#: requests carry some 57 clips, 36 MB
ALIGNED_BLOCK_REQUESTS = 1024
#: distinct sounds an aligned block of a model that reads audio holds at most, about: the decode task keeps them and
#: the block carries them (what a block of 256 requests held when each request carried its own clip)
SOUNDS_PER_BLOCK = 256


def block_requests_for_sounds(n_requests: int | None, n_sounds: int | None) -> int:
    """Requests per aligned block at most for a model that reads audio and whose ``n_requests`` play ``n_sounds``
    distinct sounds: :data:`ALIGNED_BLOCK_REQUESTS`, fewer where they share few sounds, so that a block holds about
    :data:`SOUNDS_PER_BLOCK` (MusicQA: 18 requests a clip, 1,024; a clip per request: 256). Unknown: 256."""
    if n_sounds == 0:
        return ALIGNED_BLOCK_REQUESTS  # nothing to carry (text_only)
    if not n_requests or n_sounds is None:
        return SOUNDS_PER_BLOCK
    return max(SOUNDS_PER_BLOCK, min(ALIGNED_BLOCK_REQUESTS, int(SOUNDS_PER_BLOCK * n_requests / n_sounds)))


#: blocks per CPU a model's requests are cut into at least, while blocks hold more than one batch: decode tasks
#: for every CPU, and a short last wave
BLOCKS_PER_CPU = 4


def aligned_rows(batch_size: int, n_requests: int | None = None, cpus: float = 1.0,
                 most_requests: int | None = None) -> int:
    """Rows per aligned block: a whole number of ``batch_size`` batches, one at least, at most about
    ``most_requests`` (None: :data:`ALIGNED_BLOCK_REQUESTS`), and few enough that ``n_requests`` make
    :data:`BLOCKS_PER_CPU` blocks per CPU (unknown ``n_requests``: the most)."""
    most = max(1, round((most_requests or ALIGNED_BLOCK_REQUESTS) / batch_size))
    if n_requests is None:
        return batch_size * most
    return batch_size * max(1, min(most, int(n_requests // (batch_size * max(1.0, cpus) * BLOCKS_PER_CPU))))



#: CPUs a model-based metric actor asks: a share, so that it never takes the CPUs a small node's decode and
#: judge need while the model actors hold theirs; and not the judge's and scoring tasks' 0.5: Ray Data fuses a
#: task stage into the actor stage after it when their resource asks are equal, and the judge would then run
#: inside the metric actors, one batch at a time.
METRIC_ACTOR_CPUS = 0.25


def metric_gpus(cfg: RunConfig) -> float:
    """GPUs the stream's model-based metric actors hold: ``ray.metric_actors`` when a free-form protocol runs
    BERTScore or CLAPText on a cuda device, else 0."""
    freeform = [p.freeform_metrics() for p in cfg.protocols if p.kind_spec.text_metrics]
    return float(cfg.ray.metric_actors) if any(ModelMetricsActor.uses_gpu(m) for m in freeform) else 0.0
