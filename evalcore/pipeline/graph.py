"""The Ray Data graph of a run: requests → decode+chunk → each model's actor pool → judge → score, committed by
tasks as it streams (:mod:`evalcore.pipeline.committer`).

Its functions read the :class:`GraphSettings` they are given (the part of the run's config the graph uses), never
the whole config; what each stage asks of the cluster is :mod:`evalcore.pipeline.resources`' arithmetic."""

from __future__ import annotations

import logging
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from evalcore.core import cluster, ray_internals, storage

from evalcore.reports import console
from evalcore.runconfig.config import FreeformMetrics, ModelConfig, RayConfig, RunConfig
from evalcore.models.base import MODELS
from evalcore.pipeline import commit
from evalcore.pipeline.committer import Committer
from evalcore.pipeline.placement import NodeWatch, elsewhere
from evalcore.pipeline.profile import Profile
from evalcore.pipeline.raydata import Bundle, Stream, node_offsets
from evalcore.pipeline.resources import (METRIC_ACTOR_CPUS, aligned_rows, audio_spec, block_requests_for_sounds,
                                         chunk_window, decode_memory, decode_seconds, metric_gpus, model_groups,
                                         uses_audio)
from evalcore.pipeline.stages import (ModelRunner, decode_batch, judge_batch, requests_table, response_table,
                                      sound_key)
from evalcore.pipeline.stream_metrics import LexicalMetricsActor, ModelMetricsActor, lexical_metrics, mir_rules
from evalcore.textmetrics.stream_values import lexical_plan, model_plan

log = logging.getLogger("evalcore")

BLOCK_ROWS = 16  # requests per Ray block: enough blocks for parallel decode, few enough to be cheap


@dataclass(frozen=True)
class GraphSettings:
    """What the Ray Data graph reads of a run's config."""

    root: str  #: where the workers commit their shards
    models: tuple[ModelConfig, ...]
    judges: dict[str, tuple[str, str]]  #: protocol instance → (judge kind, params JSON)
    freeform: dict[str, FreeformMetrics]  #: free-form protocol instance → its metrics
    mir: tuple[str, ...]  #: the mir protocol instances (their released rules score in the stream)
    s3: dict[str, Any]  #: the run's S3 options (endpoint, region, scheme; never keys)
    read_timeout_s: float | None
    decode_num_cpus: float
    score_actors: int
    metric_actors: int
    metric_gpus: float  #: GPUs the model-based metric actors hold (:func:`evalcore.pipeline.resources.metric_gpus`)
    actor_restarts: int = 0  #: restarts of a dead scoring or metric actor (``ray.max_restarts``)
    audio_block_requests: int | None = None  #: requests per aligned block at most for a model reading audio
    #: mir protocol instance → its configured embedder (the tagging rule's similarity), where one is
    mir_similarity: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, cfg: RunConfig, judges: dict[str, tuple[str, str]]) -> GraphSettings:
        """The settings of ``cfg``, with its protocols' ``judges`` (:func:`evalcore.pipeline.run.protocol_judges`)."""
        return cls(root=cfg.root, models=tuple(cfg.models), judges=judges,
                   freeform={p.name: p.freeform_metrics() for p in cfg.protocols if p.kind_spec.text_metrics},
                   mir=tuple(p.name for p in cfg.protocols if p.kind_spec.released_rules),
                   s3=cfg.storage.s3_options(), read_timeout_s=cfg.storage.read_timeout_s,
                   decode_num_cpus=cfg.ray.decode_num_cpus, score_actors=cfg.ray.score_actors,
                   metric_actors=cfg.ray.metric_actors, metric_gpus=metric_gpus(cfg),
                   actor_restarts=cfg.ray.max_restarts, audio_block_requests=cfg.ray.audio_block_requests,
                   mir_similarity={p.name: p.similarity.model_dump() for p in cfg.protocols
                                   if p.kind_spec.released_rules and p.similarity is not None})


def _blocks(table: pa.Table) -> list[pa.Table]:
    return [table.slice(i, BLOCK_ROWS) for i in range(0, table.num_rows, BLOCK_ROWS)] or [table]


def decode(batch: pa.Table, s3: dict | None, read_timeout_s: float | None = None, driver_node: str | None = None,
           extra_s: float = 0.0, batch_size: int = 1, **kwargs) -> pa.Table:
    """decode_batch in a Ray worker, with the run's S3 options (endpoint, region, scheme; never keys) and read
    deadline, which a worker process would not otherwise see: the driver's scope covers its own process only.
    Keys come from the worker's environment / AWS chain, as on the driver. ``extra_s``: seconds the task spends
    beyond decoding per model batch of ``batch_size`` rows in its block (a simulated model's costly input
    preparation, :func:`resources.decode_seconds`)."""
    if extra_s > 0:
        import time

        time.sleep(extra_s * -(-batch.num_rows // max(1, batch_size)))
    with storage.using(storage.StorageSettings.of(s3, read_timeout_s)):
        out = decode_batch(batch, **kwargs)
    return out if driver_node is None else elsewhere(out, driver_node)


def model_branch(model: ModelConfig, requests: Any, decode_cpus: float = 1.0, s3: dict | None = None,
                 read_timeout_s: float | None = None, n_requests: int | None = None, cpus: float = 1.0,
                 driver_node: str | None = None, audio_block_requests: int | None = None,
                 n_sounds: int | None = None):
    """Stages 3–4 for one model: decode+chunk (CPU tasks) → the model's actor pool. ``requests``: its Ray
    Dataset of requests (:func:`evalcore.pipeline.sources.request_source`), or a list of request rows;
    ``n_requests`` (about how many; a list's length when None) and the cluster's ``cpus`` size its blocks; for a
    model that reads audio, ``audio_block_requests`` (``ray.audio_block_requests``) caps them, else the distinct
    sounds its requests play (``n_sounds``, :attr:`sources.RequestPlan.sounds`; a list's own) do
    (:func:`resources.block_requests_for_sounds`); ``driver_node``: the driver's Ray node, which a decode error on
    another node names."""
    import ray.data

    sr, window = audio_spec(model)
    if isinstance(requests, list):  # requests sharing a clip sit next to each other: a decode batch reads it once
        rows = sorted(requests, key=lambda r: (r["audio_uri"] or "", r["excerpt_start"] or 0.0, r["request_id"]))
        requests = ray.data.from_arrow(_blocks(requests_table(rows)))
        n_requests = len(rows) if n_requests is None else n_requests
        if n_sounds is None:
            n_sounds = len({sound_key(r) for r in rows if r.get("condition")} - {None})
    reads = uses_audio(model)
    most = (audio_block_requests or block_requests_for_sounds(n_requests, n_sounds)) if reads else None
    ds = batch_aligned(requests, aligned_rows(model.resources.batch_size, n_requests, cpus, most))
    # Decode takes whole aligned blocks, and the model's actors take decode's blocks whole (batch_size None; the
    # actor calls the model on batches of its batch_size): a block holds each distinct sound once
    # (stages.decode_batch), so it must reach the model as it left decode. Decode reserves the memory its audio
    # needs. That also keeps it a stage of its own: Ray Data fuses only operators with equal resource requests, and
    # a fused decode would run inside the model's actor, leaving the model (a GPU in production) idle while audio
    # decodes.
    chunk_s = chunk_window(model, window)
    # a model that ignores audio (MusicLM.uses_audio False) gets no audio read: its requests pass through, and its
    # decode tasks reserve a worker's memory only
    ds = ds.map_batches(decode, fn_kwargs={"sample_rate": sr, "window_s": chunk_s, "long_audio": model.long_audio,
                                           "uses_audio": reads, "s3": s3, "read_timeout_s": read_timeout_s,
                                           "driver_node": driver_node, "extra_s": decode_seconds(model),
                                           "batch_size": model.resources.batch_size},
                        batch_size=None, batch_format="pyarrow", num_cpus=decode_cpus,
                        memory=decode_memory(model.resources.batch_size if reads else 0, sr, chunk_s))
    r = model.resources
    # a model with its own runtime_env (conflicting pins: pip / conda / container / py_executable) gets it
    # for its actors only; the run's S3 options let an actor copy an s3:// checkpoint
    # a backend may need an environment of its own (vllm_audio_lm: the interpreter with vLLM); the config's wins
    env = {**model_runtime_env(model), **(model.runtime_env or {})}
    extra = {"runtime_env": env} if env else {}
    return actor_stage(ds, model_runner(model.name), r.max_restarts,
                       fn_constructor_kwargs={"kind": model.kind, "params": model.params,
                                              "audio_spec": (sr, window), "s3": s3, "batch_size": r.batch_size},
                       batch_size=None, batch_format="pyarrow", num_cpus=r.num_cpus,
                       num_gpus=r.num_gpus, compute=ray.data.ActorPoolStrategy(size=r.concurrency),
                       resources=r.custom or None, **extra)


def actor_stage(ds, cls: type, max_restarts: int, **kwargs: Any):
    """``ds.map_batches(cls, …)`` on a pool of actors that a death (a lost node, a killed process) restarts
    ``max_restarts`` times on any node with room, retrying the batches the dead actor held (Ray Data asks
    ``max_task_retries=-1`` of a restartable pool); one more death ends the run, exit 1, and --resume finishes it
    (0: the first). Every actor pool of a run goes through here: Ray Data's own default restarts without end. Ray
    2.60 takes ``max_restarts`` only as a remote arg, which it marks deprecated (gone in 2.64). A restartable pool
    makes Ray log an ERROR line once per process, which :func:`init_ray` spends away from the console
    (:func:`evalcore.core.ray_internals.spend_restart_warning`)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        return ds.map_batches(cls, max_restarts=max_restarts, **kwargs)


def batch_aligned(ds: Any, rows: int, num_cpus: float = 0.1) -> Any:
    """``ds`` (request rows) in blocks of ``rows`` (a whole number of the model's batches, :func:`aligned_rows`)
    but the last, so that each model batch is full. Ray Data splits a read task's output into parts that do not
    line up with the batch size, and no batch spans two blocks of different tasks: without this, about half of a
    model's batches came short. A strict streaming repartition stitches the small request rows across blocks."""
    ds = ds.repartition(target_num_rows_per_block=rows, strict=True)
    # Ray 2.60's repartition takes no resource arguments and asks a whole CPU per task, which stalls a small
    # node's decode and model stages behind it (20k requests on 2 CPUs: 117 s against 79 s); its tasks only
    # slice request rows. The attribute is private (ray is pinned; evalcore/core/ray_internals.py), and a test checks
    # that the model stage gets full batches.
    return ray_internals.set_repartition_cpus(ds, num_cpus)


def model_runtime_env(model: ModelConfig) -> dict:
    """The Ray runtime_env the model's class asks for its actors (``runtime_env(params)``), else none."""
    hook = getattr(MODELS.get(model.kind), "runtime_env", None)
    return dict(hook(model.params)) if callable(hook) else {}


def model_runner(name: str) -> type[ModelRunner]:
    """:class:`ModelRunner` under the name Ray Data shows for the model's stage: ``model:<name>``."""
    return type(f"model:{name}", (ModelRunner,), {"__doc__": ModelRunner.__doc__})


def judge(batch: pa.Table, judges: dict[str, tuple[str, str]], s3: dict | None = None,
          read_timeout_s: float | None = None) -> pa.Table:
    """The judge stage (:func:`judge_batch`) under the name Ray Data shows: ``judge``; with the run's S3 options and
    read deadline (an LLM judge's cache and log may be on ``s3://``), as :func:`decode`."""
    with storage.using(storage.StorageSettings.of(s3, read_timeout_s)):
        return judge_batch(batch, judges)


def judged_batches(settings: GraphSettings, sources: dict[str, Any], attempt: int = 0,
                   shard_rows: int = commit.WORKER_SHARD_ROWS[0], score_pool: bool = False,
                   ready: Mapping[str, int] | None = None, profile: Profile | None = None,
                   every_s: float = commit.COMMIT_SECONDS, sounds: Mapping[str, int] | None = None
                   ) -> Iterator[pa.Table]:
    """Stages 3–5 on Ray, committed by tasks as the scored blocks come (:mod:`evalcore.pipeline.committer`):
    yields, as each commit completes, its tally rows (:func:`commit.commit_batch`), and whole the rows of requests
    whose chunks it did not hold (the driver's :class:`commit.ShardWriter` commits those). ``sources``: model name →
    its requests to run (a Ray Dataset or a list of rows); models without any are skipped. ``attempt``: the run
    attempt the shards belong to; ``shard_rows``: rows per shard at most, about, and ``every_s``: seconds between
    commits at most, about (the first block is committed at once); ``score_pool``: score on a pool of actors
    (:func:`scored`); ``ready``: model name → about how many requests it runs (sizes its blocks,
    :func:`aligned_rows`), and ``sounds``: per model that reads audio, the distinct sounds they play (caps its
    blocks); ``profile``: gets the stages' figures from Ray Data's own operator stats."""
    import ray

    res = ray.cluster_resources()
    driver_node = ray.get_runtime_context().get_node_id()
    custom = {k: res.get(k, 0.0) for m in settings.models for k in m.resources.custom}
    gpus = res.get("GPU", 0.0) - settings.metric_gpus  # the metric actors' GPUs are not the models'
    streams: list[Stream] = []

    def bundles() -> Iterator[Bundle]:
        for group in model_groups(list(settings.models), res.get("CPU", 1.0), gpus, custom):
            branches = [model_branch(m, sources[m.name], settings.decode_num_cpus, settings.s3,
                                     settings.read_timeout_s, (ready or {}).get(m.name), res.get("CPU", 1.0),
                                     driver_node, settings.audio_block_requests, (sounds or {}).get(m.name))
                        for m in group if m.name in sources]
            if not branches:
                continue
            ds = branches[0].union(*branches[1:]) if len(branches) > 1 else branches[0]
            ds = ds.map_batches(judge, fn_kwargs={"judges": settings.judges, "s3": settings.s3,
                                                  "read_timeout_s": settings.read_timeout_s},
                                batch_size=64, batch_format="pyarrow", num_cpus=0.5)
            streams.append(Stream(scored(settings, ds, score_pool)))
            yield from streams[-1].bundles()

    committer = Committer(settings.root, attempt, settings.s3, shard_rows, every_s,
                          read_timeout_s=settings.read_timeout_s)
    handed = 0  # rows the commits handed on: committed (tally rows count theirs) or back to the driver whole
    watch = NodeWatch()
    for out in committer.run(bundles()):
        handed += int(pc.sum(pc.fill_null(out.column(commit.ROWS_COLUMN), 1)).as_py() or 0)
        watch.poll()
        yield out
    watch.poll(now_or_never=True)
    if profile is not None:
        try:  # Ray Data's internals (evalcore.pipeline.raydata): a Ray that moved them costs the profile, not the run
            ops = [op for s in streams for op in s.operators()]
            profile.add_operators(ops, node_offsets({n for op in ops for n, _, _ in op.spans}),
                                  {m.name: m.resources.concurrency for m in settings.models})
        except Exception as e:  # noqa: BLE001
            log.warning("profile: Ray Data's operator stats could not be read (%s); its stages are left out",
                        type(e).__name__)
        profile.add_commit(committer.stage, handed)
        profile.nodes_lost += watch.lost


def rejudged_batches(settings: GraphSettings, rows: list[dict]) -> Iterator[pa.Table]:
    """Stage 5 alone on Ray: committed answers judged again (their model is not called)."""
    if not rows:
        return
    import ray

    ds = ray.data.from_arrow(_blocks(response_table(rows)))
    ds = ds.map_batches(judge, fn_kwargs={"judges": settings.judges, "s3": settings.s3,
                                         "read_timeout_s": settings.read_timeout_s}, batch_size=64,
                        batch_format="pyarrow", num_cpus=0.5)
    yield from scored(settings, ds).iter_batches(batch_size=None, batch_format="pyarrow")


def scored(settings: GraphSettings, ds, pool: bool = False):
    """The judged rows with their per-request free-form metrics, scored in the workers' batches. Lexical:
    with ``pool``, by a pool of scoring actors (each loads its metrics' resources, e.g. WordNet, once and keeps
    its pair cache: 20k requests of benchmarks/scale.py in 57 s instead of 72 s), else by tasks (the demo's 3,848
    requests in 58 s instead of 99 s: the actors' start is not paid back). BERTScore and CLAPText: by
    ``ray.metric_actors`` actors holding their models (:class:`evalcore.pipeline.stream_metrics.ModelMetricsActor`)."""
    import ray.data

    freeform = settings.freeform
    plan = lexical_plan({name: (m.profile, m.names) for name, m in freeform.items()})
    if plan and not pool:  # tasks, fused with the judge: a short run does not pay for actors loading WordNet
        ds = ds.map_batches(lexical_metrics, fn_kwargs={"plan": plan}, batch_size=64, batch_format="pyarrow",
                            num_cpus=0.5)
    elif plan:
        ds = actor_stage(ds, LexicalMetricsActor, settings.actor_restarts, fn_constructor_kwargs={"plan": plan}, batch_size=64,
                         batch_format="pyarrow", num_cpus=0.5,
                         compute=ray.data.ActorPoolStrategy(min_size=1, max_size=settings.score_actors))
    if settings.mir:  # the mir rules (mir_eval, jiwer, …) on the workers' batches, overlapping the models
        ds = ds.map_batches(mir_rules, fn_kwargs={"protocols": settings.mir, "similarity": settings.mir_similarity},
                            batch_size=64, batch_format="pyarrow", num_cpus=0.5)
    models = model_plan(freeform)
    if models:  # BERTScore, CLAPText: actors holding their models, on GPUs where a metric's device is cuda
        gpus = settings.metric_gpus
        if gpus > ray.cluster_resources().get("GPU", 0.0):
            log.warning("free-form metrics on cuda ask for %g GPU (ray.metric_actors) but the cluster has %g now",
                        gpus, ray.cluster_resources().get("GPU", 0.0))
        ds = actor_stage(ds, ModelMetricsActor, settings.actor_restarts,
                         fn_constructor_kwargs={"plan": models, "s3": settings.s3},
                         batch_size=64, batch_format="pyarrow", num_cpus=METRIC_ACTOR_CPUS,
                         num_gpus=1 if gpus else 0, compute=ray.data.ActorPoolStrategy(size=settings.metric_actors))
    return ds


_restart_warning_spent = False


def spend_restart_warning() -> None:
    """Once per driver process: Ray's ERROR line about restartable actor pools, printed away from the console
    (:func:`evalcore.core.ray_internals.spend_restart_warning`); any other line written meanwhile goes to stderr."""
    global _restart_warning_spent
    if _restart_warning_spent:
        return
    _restart_warning_spent = True
    for line in ray_internals.spend_restart_warning():
        print(line, file=sys.stderr)


def init_ray(ray_cfg: RayConfig) -> None:
    """Ray for this driver: ``ray.address``, else ``$RAY_ADDRESS``, else a new local cluster that dies with the
    driver, even on ``kill -9`` (:mod:`evalcore.core.cluster`)."""
    from ray.data import DataContext

    from evalcore.pipeline import backpressure, starvation  # heavy: import ray; `evalcore --help` imports this module

    cluster.start(ray_cfg.address, log_to_driver=False, configure_logging=False)
    spend_restart_warning()
    ctx = DataContext.get_current()
    ctx.enable_progress_bars = ray_cfg.progress_bars and console.on_terminal()  # else: one line per stage
    console.quiet_ray_data()
    ctx.print_on_execution_start = False
    backpressure.install(ctx, ray_cfg.max_queued_blocks)
    starvation.install(ctx)
