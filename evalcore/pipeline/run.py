"""The evaluation pipeline, as a list of stages.

    read items → expand requests → [per model] fetch+decode+chunk → model actor pool
    → judge → commit responses/judgments (Parquet shards) → score → summary → report

Ray Data streams requests through decode, model and judge stages; decoded audio exists
only between the decode stage and the model's actor pool. Items and judged rows are committed
as they come (:mod:`evalcore.pipeline.commit`), so ``run(cfg, resume=True)`` finishes a killed
run without repeating committed work (:mod:`evalcore.pipeline.resume`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import warnings
from collections import Counter
from typing import Any, Callable, Iterable, Iterator, Mapping

import pandas as pd
import pyarrow as pa

import evalcore
from evalcore import cluster, console, preflight, storage
from evalcore.config import ModelConfig, RunConfig
from evalcore.datasets.base import DatasetContext
from evalcore.item_table import SLICE_ROWS, ItemTable
from evalcore.datasets.validate import validated
from evalcore.errors import RETRY_BY_DEFAULT, TRANSIENT, bounded
from evalcore.pipeline import commit
from evalcore.pipeline.llm_resources import hold_budgets, with_run_llm_roots
from evalcore.pipeline.outcome import RunResult, check_error_budget, check_scored, protocols_without_items
from evalcore.pipeline.outcome import ErrorBudgetExceeded, NothingScored, RunUnscored, error_reason  # noqa: F401 (API)
from evalcore.pipeline.reduce import group_rows, reduce_rows
from evalcore.pipeline.resume import open_run, rejudged_rows, retried_requests
from evalcore.pipeline.sources import RequestPlan, plan_requests, reject_disallowed_audio, request_source  # noqa: F401
from evalcore.pipeline.stages import ModelRunner, decode_batch, judge_batch, requests_table, response_table
from evalcore.metrics.stage import ModelScorer, lexical_plan, model_plan, score_batch
from evalcore.metrics.freeform import uses_ray
from evalcore.protocols import checks
from evalcore.protocols.requests import Expansion, expansion, iter_requests
from evalcore.protocols.vocab_fit import default_judge
from evalcore.registry import DATASETS, MODELS
from evalcore.reports import markdown, report_html, verdict
from evalcore.scoring.agreement import agreement
from evalcore.scoring.requests import error_rows
from evalcore.scoring.summary import summary_table
from evalcore.schema import ERRORS, conform

log = logging.getLogger("evalcore")

BLOCK_ROWS = 16  # requests per Ray block: enough blocks for parallel decode, few enough to be cheap


# ----------------------------------------------------------------------------- stages on the driver


def read_items(cfg: RunConfig) -> tuple[ItemTable, list[dict], int]:
    """Stage 1: every dataset's items, validated, audio paths made absolute here on the driver, factual labels
    checked against the judge's vocabulary → (items, error rows, rows read). Items are held as an Arrow table,
    converted a slice at a time as they are validated."""
    import evalcore.datasets  # noqa: F401  (registers the datasets)

    parts: list[ItemTable] = []
    errors: list[dict] = []
    outside: list[dict] = []
    judges = factual_judges(cfg)
    n_in = 0
    pending: list[dict] = []

    def flush() -> None:
        for it in pending:  # a worker would resolve a relative path against its own working directory
            it["audio_uri"] = storage.absolute(it["audio_uri"])
        kept, out, _ = checks.check_instances(pending, judges)  # an item's check reads that item alone
        outside.extend(out)
        parts.append(ItemTable.from_rows(kept))
        pending.clear()

    for d in cfg.datasets:
        source = DATASETS.build(d.kind, **d.params)
        for item, error in validated(d.name, source.items(DatasetContext(name=d.name, run_root=cfg.root,
                                                                          seed=cfg.seeds.derangement))):
            n_in += 1
            if item is None:
                errors.append(error)
                continue
            pending.append(item)
            if len(pending) >= SLICE_ROWS:
                flush()
    flush()
    outside.sort(key=lambda e: (e["dataset"], e["item_id"]))
    return ItemTable.concat(parts), errors + outside, n_in


def factual_judges(cfg: RunConfig) -> list[tuple[set[str] | None, tuple[str, str]]]:
    """(datasets, or None for all; judge kind and params JSON) of every factual protocol instance."""
    judges = protocol_judges(cfg)
    return [(set(p.datasets) if p.datasets is not None else None, judges[p.name])
            for p in cfg.protocols if p.kind == "factual" and p.name in judges]


def audio_spec(model: ModelConfig) -> tuple[int, float | None]:
    """(sample rate, longest window in s) of a model, from its params or its class defaults."""
    import evalcore.models  # noqa: F401  (registers the models)

    cls = MODELS.get(model.kind)
    if callable(getattr(cls, "audio_spec", None)):  # MusicLM.audio_spec: params, class defaults or the checkpoint
        return cls.audio_spec(dict(model.params))
    sr = int(model.params.get("sample_rate", getattr(cls, "sample_rate", 16_000)))
    window = model.params.get("max_audio_seconds", getattr(cls, "max_audio_seconds", None))
    return sr, (float(window) if window is not None else None)


def uses_audio(model: ModelConfig) -> bool:
    """Whether a model reads audio (its class's ``MusicLM.uses_audio``), without building it."""
    import evalcore.models  # noqa: F401  (registers the models)

    return bool(getattr(MODELS.get(model.kind), "uses_audio", True))


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
    """Bytes a decode task reserves: a worker (~384 MiB with its imports) plus its batch of float32 audio (30 s
    per item when unbounded) as decoded (48 kHz stereo) and twice at the model's rate (downmix/resample copies).
    Ray Data warns when a task outgrows it: 30 s MP3s in batches of 8 took 480 MiB against 315 reserved."""
    seconds = window_s if window_s is not None else 30.0
    decoded = SOURCE_RATE * SOURCE_CHANNELS + 2 * sample_rate
    return (384 << 20) + int(batch_size * seconds * decoded * 4)


def _blocks(table: pa.Table) -> list[pa.Table]:
    return [table.slice(i, BLOCK_ROWS) for i in range(0, table.num_rows, BLOCK_ROWS)] or [table]


def decode(batch: pa.Table, s3: dict | None, read_timeout_s: float | None = None, **kwargs) -> pa.Table:
    """decode_batch in a Ray worker, with the run's S3 options (endpoint, region, scheme; never keys) and read
    deadline, which a worker process would not otherwise see: the driver sets them in its own process only.
    Keys come from the worker's environment / AWS chain, as on the driver."""
    if s3 is not None:
        storage.configure_s3(storage.S3Options(**s3))
    if read_timeout_s is not None:
        storage.configure_reads(read_timeout_s)
    return decode_batch(batch, **kwargs)


def chunk_window(model: ModelConfig, window: float | None) -> float | None:
    """Seconds per decoded chunk: the model's window, or ``chunk_seconds`` when shorter (or no window)."""
    if model.chunk_seconds is None:
        return window
    return model.chunk_seconds if window is None else min(window, model.chunk_seconds)


def model_branch(model: ModelConfig, requests: Any, decode_cpus: float = 1.0, s3: dict | None = None,
                 read_timeout_s: float | None = None, n_requests: int | None = None, cpus: float = 1.0):
    """Stages 3–4 for one model: decode+chunk (CPU tasks) → the model's actor pool. ``requests``: its Ray
    Dataset of requests (:func:`evalcore.pipeline.sources.request_source`), or a list of request rows;
    ``n_requests`` (about how many; a list's length when None) and the cluster's ``cpus`` size its blocks."""
    import ray.data

    sr, window = audio_spec(model)
    if isinstance(requests, list):  # requests sharing a clip sit next to each other: a decode batch reads it once
        rows = sorted(requests, key=lambda r: (r["audio_uri"] or "", r["excerpt_start"] or 0.0, r["request_id"]))
        requests = ray.data.from_arrow(_blocks(requests_table(rows)))
        n_requests = len(rows) if n_requests is None else n_requests
    ds = batch_aligned(requests, aligned_rows(model.resources.batch_size, n_requests, cpus))
    # Decode reserves the memory its batch of audio needs. That also keeps it a stage of its own: Ray Data
    # fuses only operators with equal resource requests, and a fused decode would run inside the model's
    # actor, leaving the model (a GPU in production) idle while audio decodes.
    chunk_s = chunk_window(model, window)
    # a model that ignores audio (MusicLM.uses_audio False) gets no audio read: its requests pass through, and its
    # decode tasks reserve a worker's memory only
    reads = uses_audio(model)
    ds = ds.map_batches(decode, fn_kwargs={"sample_rate": sr, "window_s": chunk_s, "long_audio": model.long_audio,
                                           "uses_audio": reads, "s3": s3, "read_timeout_s": read_timeout_s},
                        batch_size=model.resources.batch_size, batch_format="pyarrow", num_cpus=decode_cpus,
                        memory=decode_memory(model.resources.batch_size if reads else 0, sr, chunk_s))
    r = model.resources
    # a model with its own runtime_env (conflicting pins: pip / conda / container / py_executable) gets it
    # for its actors only; the run's S3 options let an actor copy an s3:// checkpoint
    # a backend may need an environment of its own (vllm_audio_lm: the interpreter with vLLM); the config's wins
    env = {**model_runtime_env(model), **(model.runtime_env or {})}
    extra = {"runtime_env": env} if env else {}
    return actor_stage(ds, model_runner(model.name), r.max_restarts,
                       fn_constructor_kwargs={"kind": model.kind, "params": model.params,
                                              "audio_spec": (sr, window), "s3": s3},
                       batch_size=r.batch_size, batch_format="pyarrow", num_cpus=r.num_cpus,
                       num_gpus=r.num_gpus, compute=ray.data.ActorPoolStrategy(size=r.concurrency),
                       resources=r.custom or None, **extra)


def actor_stage(ds, cls: type, max_restarts: int, **kwargs: Any):
    """``ds.map_batches(cls, …)`` on a pool of actors that a death restarts ``max_restarts`` times (0: a dead actor
    ends the run, exit 1, and --resume finishes it). Every actor pool of a run goes through here: Ray Data's own
    default restarts a dead actor and retries its batches without end, and Ray logs an ERROR-level line
    (``core_worker.cc``: "has constructor arguments in the object store and max_restarts > 0",
    ray-project/ray#53727) for each pool on every run. Ray 2.60 takes ``max_restarts`` only as a remote arg, which
    it marks deprecated (gone in 2.64)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        return ds.map_batches(cls, max_restarts=max_restarts, **kwargs)


#: requests per block after the batch alignment at most, about (a whole number of the model's batches): a decode
#: task takes a block, so blocks of one batch each cost a task per batch (MusicQA's 20,160 requests in batches of 8
#: on 2 CPUs: 378 s, against 135 s before the alignment)
ALIGNED_BLOCK_REQUESTS = 256
#: blocks per CPU a model's requests are cut into at least, while blocks hold more than one batch: decode tasks
#: for every CPU, and a short last wave
BLOCKS_PER_CPU = 4


def aligned_rows(batch_size: int, n_requests: int | None = None, cpus: float = 1.0) -> int:
    """Rows per aligned block: a whole number of ``batch_size`` batches, one at least, at most about
    :data:`ALIGNED_BLOCK_REQUESTS`, and few enough that ``n_requests`` make :data:`BLOCKS_PER_CPU` blocks per CPU
    (unknown ``n_requests``: the most)."""
    most = max(1, round(ALIGNED_BLOCK_REQUESTS / batch_size))
    if n_requests is None:
        return batch_size * most
    return batch_size * max(1, min(most, int(n_requests // (batch_size * max(1.0, cpus) * BLOCKS_PER_CPU))))


def batch_aligned(ds: Any, rows: int, num_cpus: float = 0.1) -> Any:
    """``ds`` (request rows) in blocks of ``rows`` (a whole number of the model's batches, :func:`aligned_rows`)
    but the last, so that each model batch is full. Ray Data splits a read task's output into parts that do not
    line up with the batch size, and no batch spans two blocks of different tasks: without this, about half of a
    model's batches came short. A strict streaming repartition stitches the small request rows across blocks."""
    from ray.data._internal.logical.operators import StreamingRepartition

    ds = ds.repartition(target_num_rows_per_block=rows, strict=True)
    # Ray 2.60's repartition takes no resource arguments and asks a whole CPU per task, which stalls a small
    # node's decode and model stages behind it (20k requests on 2 CPUs: 117 s against 79 s); its tasks only
    # slice request rows. The attribute is private (ray is pinned): the assertion catches a Ray that builds
    # the operator otherwise, and a test checks that the model stage gets full batches.
    op = ds._logical_plan.dag
    assert isinstance(op, StreamingRepartition), type(op)
    object.__setattr__(op, "ray_remote_args", {"num_cpus": num_cpus})
    return ds


def model_runtime_env(model: ModelConfig) -> dict:
    """The Ray runtime_env the model's class asks for its actors (``runtime_env(params)``), else none."""
    hook = getattr(MODELS.get(model.kind), "runtime_env", None)
    return dict(hook(model.params)) if callable(hook) else {}


def model_runner(name: str) -> type[ModelRunner]:
    """:class:`ModelRunner` under the name Ray Data shows for the model's stage: ``model:<name>``."""
    return type(f"model:{name}", (ModelRunner,), {"__doc__": ModelRunner.__doc__})


def judge(batch: pa.Table, judges: dict[str, tuple[str, str]]) -> pa.Table:
    """The judge stage (:func:`judge_batch`) under the name Ray Data shows: ``judge``."""
    return judge_batch(batch, judges)


def protocol_judges(cfg: RunConfig) -> dict[str, tuple[str, str]]:
    """protocol instance → (judge kind, params JSON): the configured judge, else its kind's default, fitted to
    the tasks of its datasets (:func:`evalcore.protocols.vocab_fit.default_judge`): factual and MCQ answers
    are never left unjudged, nor read into another task's vocabulary."""
    return {p.name: (j.kind, json.dumps(j.params, sort_keys=True))
            for p in cfg.protocols if (j := p.judge or default_judge(cfg, p)) is not None}


def judged_batches(cfg: RunConfig, sources: dict[str, Any], attempt: int = 0,
                   shard_rows: int = commit.WORKER_SHARD_ROWS[0], score_pool: bool = False,
                   ready: Mapping[str, int] | None = None) -> Iterator[pa.Table]:
    """Stages 3–5 on Ray, committed by the workers: yields, as they complete, the judged rows (one per chunk) as
    a commit's tally rows where a worker committed them (:func:`commit.commit_batch`), whole where the driver
    must (a request whose chunks came in different batches). ``sources``: model name → its requests to run (a Ray Dataset
    or a list of rows); models without any are skipped. ``attempt``: the run attempt the shards belong to;
    ``shard_rows``: rows per shard the workers commit; ``score_pool``: score on a pool of actors (:func:`scored`);
    ``ready``: model name → about how many requests it runs (sizes its blocks, :func:`aligned_rows`)."""
    import ray

    judges = protocol_judges(cfg)
    res = ray.cluster_resources()
    custom = {k: res.get(k, 0.0) for m in cfg.models for k in m.resources.custom}
    gpus = res.get("GPU", 0.0) - metric_gpus(cfg)  # the metric actors' GPUs are not the models'
    for group in model_groups(cfg.models, res.get("CPU", 1.0), gpus, custom):
        s3 = cfg.storage.s3.model_dump()
        branches = [model_branch(m, sources[m.name], cfg.ray.decode_num_cpus, s3, cfg.storage.read_timeout_s,
                                 (ready or {}).get(m.name), res.get("CPU", 1.0))
                    for m in group if m.name in sources]
        if not branches:
            continue
        ds = branches[0].union(*branches[1:]) if len(branches) > 1 else branches[0]
        ds = ds.map_batches(judge, fn_kwargs={"judges": judges}, batch_size=64, batch_format="pyarrow",
                            num_cpus=0.5)
        ds = committed_by_workers(cfg, scored(cfg, ds, score_pool), attempt, shard_rows)
        yield from ds.iter_batches(batch_size=None, batch_format="pyarrow")


# ----------------------------------------------------------------------------- the run


def init_ray(cfg: RunConfig) -> None:
    """Ray for this driver: ``ray.address``, else ``$RAY_ADDRESS``, else a new local cluster that dies with the
    driver, even on ``kill -9`` (:mod:`evalcore.cluster`)."""
    from ray.data import DataContext

    from evalcore.pipeline import backpressure

    cluster.start(cfg.ray.address, log_to_driver=False, configure_logging=False)
    ctx = DataContext.get_current()
    ctx.enable_progress_bars = cfg.ray.progress_bars and console.on_terminal()  # else: one line per stage
    console.quiet_ray_data()
    ctx.print_on_execution_start = False
    backpressure.install(ctx, cfg.ray.max_queued_blocks)


def run(cfg: RunConfig, resume: bool = False, commit_every_s: float = commit.COMMIT_SECONDS,
        retry_errors: Iterable[str] = RETRY_BY_DEFAULT, ping: bool = False) -> RunResult:
    """Run the whole evaluation described by ``cfg``; returns where it wrote and its counts.

    Outputs are committed shard by shard (:mod:`evalcore.pipeline.commit`). ``resume`` continues a killed
    or failed run at ``cfg.root``: committed requests are not sent to any model or judge again, except
    those committed as error rows of a class in ``retry_errors`` (default: transient), which run again —
    a request that failed only in its judge is judged again on its committed answer, without its model.
    ``ping``: call each LLM endpoint once before anything runs (:func:`evalcore.preflight.check_endpoints`)."""
    storage.configure_s3(storage.S3Options(**cfg.storage.s3.model_dump()))
    storage.configure_reads(cfg.storage.read_timeout_s)
    preflight.check(cfg, datasets=not resume)  # a missing file or checkpoint fails here, before Ray and any model
    if ping:
        preflight.check_endpoints(cfg)  # an endpoint down, a refused key, an unknown model: before Ray too
    out = open_run(cfg, resume)  # every write of the run goes through it: nothing lands outside the root
    cfg = with_run_llm_roots(cfg)  # LLM caches and logs default to the run's root (not saved in its config)

    # 1. items (read once per run: a resumed run uses the committed items)
    items, item_errors, n_items_in = items_stage(cfg, out)
    judges = factual_judges(cfg)
    warnings = checks.warnings(items, {}, outside=sum((checks.check_instances(chunk, judges)[2]
                                                       for chunk in items.chunks()), Counter()))
    for w in warnings:
        log.warning("items: %s", w)

    # 2. requests, minus those an earlier attempt committed: counted in one pass on the driver, produced on Ray
    # what earlier attempts committed, from the markers' indexes: only the shards of requests run again are read
    index = commit.load_index(cfg.root) if resume else commit.CommitIndex({}, {})
    again_ids = index.with_errors(set(retry_errors)) if resume else set()
    retried = retried_requests(commit.load_requests(cfg.root, index, again_ids), set(retry_errors)) if again_ids else {}
    done = index.request_ids - set(retried)
    rejudge = rejudged_rows(retried)
    again = {r["request_id"] for r in rejudge}
    exp = expansion(cfg, items)
    if done:  # committed ids the run cannot produce mean the run changed: refused before anything is written
        check_committed(cfg.root, plan_requests(cfg, items, exp, done, again), len(done))

    # 3–5. decode → model → judge → score → commit on Ray; the driver commits what cannot be formed
    with commit.ShardWriter(out, attempt=index.next_attempt, every_s=commit_every_s) as writer:
        plan = plan_requests(cfg, items, exp, done, again,
                             on_unformed=lambda r: writer.add([{**r, "chunk_index": 0, "n_chunks": 1}]))
        if plan.outside:
            log.warning("requests: %d with audio outside storage.allowed_audio_roots (error rows)", plan.outside)
        log.info("requests: %d (%d could not be formed; %d committed earlier, %d to run)",
                 plan.total, plan.unformed, plan.committed, plan.to_run + plan.rejudged)
        if retried:
            log.info("resume: %d committed error row(s) of class %s run again (%d judged again on their committed "
                     "answer)", len(retried), "/".join(sorted(set(retry_errors))), len(again))
        if plan.to_run or rejudge:
            init_ray(cfg)
            budgets = hold_budgets(cfg)  # named rate budgets live as long as the driver holds them
            for batch in rejudged_batches(cfg, rejudge):
                writer.add_stream(batch)
            streams = judged_batches(cfg, sources(cfg, items, exp, plan, done | again), writer.attempt,
                                     commit.worker_shard_rows(plan.to_run), plan.to_run >= SCORE_POOL_FROM,
                                     plan.ready)
            for batch in console.tallied(streams, plan.to_run, cfg.ray.progress_bars):
                writer.add_stream(batch)
            del budgets
    account_for_all(cfg, items, exp, plan.total, out)

    # 6. score and report over every committed row; the error budget is checked after both are written
    attempt = {"requests_sent": plan.to_run, "requests_rejudged": plan.rejudged,
               "requests_committed_earlier": plan.committed}
    return finish(cfg, items_in=n_items_in, item_errors=item_errors, warnings=warnings,
                  empty=protocols_without_items(cfg, items), attempt=attempt)


def sources(cfg: RunConfig, items: ItemTable, exp: Expansion, plan: RequestPlan, skip: set[str]) -> dict[str, Any]:
    """model name → the Ray Dataset of its requests to run (models with none left out); the expansion tables
    and the ids not to run go to the object store once, for every read task to fetch."""
    import ray

    exp_ref = ray.put(exp)
    skip_ref = ray.put(frozenset(skip)) if skip else frozenset()
    return {m.name: request_source(cfg, items, exp_ref, m, plan.ready[m.name], skip_ref)
            for m in cfg.models if plan.ready.get(m.name)}


def check_committed(root: str, plan: RequestPlan, n_done: int) -> None:
    """Raise :class:`commit.RunStateError` when committed requests are not all requests of this run."""
    foreign = n_done - plan.committed
    if foreign:
        raise commit.RunStateError(f"{root}: {foreign} committed request(s) are not requests of this run's "
                                   "config and items (was the run changed?); refusing to mix them")


def rejudged_batches(cfg: RunConfig, rows: list[dict]) -> Iterator[pa.Table]:
    """Stage 5 alone on Ray: committed answers judged again (their model is not called)."""
    if not rows:
        return
    import ray

    ds = ray.data.from_arrow(_blocks(response_table(rows)))
    ds = ds.map_batches(judge, fn_kwargs={"judges": protocol_judges(cfg)}, batch_size=64,
                        batch_format="pyarrow", num_cpus=0.5)
    yield from scored(cfg, ds).iter_batches(batch_size=None, batch_format="pyarrow")


SCORE_POOL_FROM = 10_000  # requests to run from which lexical scoring runs on a pool of actors


def scored(cfg: RunConfig, ds, pool: bool = False):
    """The judged rows with their per-request free-form metrics, scored in the workers' batches. Lexical:
    with ``pool``, by a pool of scoring actors (each loads its metrics' resources, e.g. WordNet, once and keeps
    its pair cache: 20k requests of benchmarks/scale.py in 57 s instead of 72 s), else by tasks (the demo's 3,848
    requests in 58 s instead of 99 s: the actors' start is not paid back). BERTScore and CLAPText: by
    ``ray.metric_actors`` actors holding their models (:class:`evalcore.metrics.stage.ModelScorer`)."""
    import ray.data

    freeform = {p.name: p.freeform_metrics() for p in cfg.protocols if p.kind == "freeform"}
    plan = lexical_plan({name: (m.profile, m.names) for name, m in freeform.items()})
    if plan and not pool:  # tasks, fused with the judge: a short run does not pay for actors loading WordNet
        ds = ds.map_batches(score, fn_kwargs={"plan": plan}, batch_size=64, batch_format="pyarrow", num_cpus=0.5)
    elif plan:
        ds = actor_stage(ds, Scoring, 0, fn_constructor_kwargs={"plan": plan}, batch_size=64, batch_format="pyarrow",
                         num_cpus=0.5, compute=ray.data.ActorPoolStrategy(min_size=1, max_size=cfg.ray.score_actors))
    models = model_plan(freeform)
    if models:  # BERTScore, CLAPText: actors holding their models, on GPUs where a metric's device is cuda
        gpus = metric_gpus(cfg)
        if gpus > ray.cluster_resources().get("GPU", 0.0):
            log.warning("free-form metrics on cuda ask for %g GPU (ray.metric_actors) but the cluster has %g now",
                        gpus, ray.cluster_resources().get("GPU", 0.0))
        ds = actor_stage(ds, ModelScoring, 0,
                         fn_constructor_kwargs={"plan": models, "s3": cfg.storage.s3.model_dump()},
                         batch_size=64, batch_format="pyarrow", num_cpus=METRIC_ACTOR_CPUS,
                         num_gpus=1 if gpus else 0, compute=ray.data.ActorPoolStrategy(size=cfg.ray.metric_actors))
    return ds


#: CPUs a model-based metric actor asks: a share, so that it never takes the CPUs a small node's decode and
#: judge need while the model actors hold theirs; and not the judge's and scoring tasks' 0.5: Ray Data fuses a
#: task stage into the actor stage after it when their resource asks are equal, and the judge would then run
#: inside the metric actors, one batch at a time.
METRIC_ACTOR_CPUS = 0.25


def metric_gpus(cfg: RunConfig) -> float:
    """GPUs the stream's model-based metric actors hold: ``ray.metric_actors`` when a free-form protocol runs
    BERTScore or CLAPText on a cuda device, else 0."""
    freeform = [p.freeform_metrics() for p in cfg.protocols if p.kind == "freeform"]
    return float(cfg.ray.metric_actors) if any(ModelScorer.uses_gpu(m) for m in freeform) else 0.0


def score(batch: pa.Table, plan: Any) -> pa.Table:
    """The scoring stage (:func:`score_batch`) as Ray tasks, under the name Ray Data shows: ``score``."""
    return score_batch(batch, plan)


class Scoring:
    """The scoring stage (:func:`score_batch`) as a Ray Data actor, under the name Ray Data shows: ``score``."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan

    def __call__(self, batch: pa.Table) -> pa.Table:
        return score_batch(batch, self.plan)


Scoring.__name__ = "score"  # (its qualified name stays Scoring: workers find the class by it)


class ModelScoring(ModelScorer):
    """The model-based metrics' stage (:class:`ModelScorer`) as a Ray Data actor, under the name Ray Data
    shows: ``score_models``."""


ModelScoring.__name__ = "score_models"


def committed_by_workers(cfg: RunConfig, ds, attempt: int = 0, shard_rows: int = commit.WORKER_SHARD_ROWS[0]):
    """The commit stage on Ray: each batch's complete requests committed as a shard by the worker
    (:func:`commit.commit_batch`); what comes back to the driver is a few tally rows per shard, and in full only
    the rows of requests whose chunks are split over batches (the driver's :class:`commit.ShardWriter` commits
    those)."""
    return ds.map_batches(commit.commit_batch, fn_kwargs={"root": cfg.root, "attempt": attempt,
                                                          "s3": cfg.storage.s3.model_dump()},
                          batch_size=shard_rows, batch_format="pyarrow", num_cpus=COMMIT_CPUS)


#: CPUs a commit task asks: little, so that it fits the CPU share Ray Data reserves per stage while every stage is
#: running (1M requests on 2 CPUs: a commit asking 0.25 never started while the reads were held back)
COMMIT_CPUS = 0.05


def items_stage(cfg: RunConfig, out: storage.RunStorage) -> tuple[ItemTable, list[dict], int]:
    """Stage 1 with its commit: the committed items of the run if any, else read, validate and commit."""
    loaded = commit.load_items(cfg.root)
    if loaded is None:
        loaded = read_items(cfg)
        commit.commit_items(out, *loaded)
    items, item_errors, n_items_in = loaded
    log.info("items: %d read, %d valid, %d errored", n_items_in, len(items), len(item_errors))
    return items, item_errors, n_items_in


def account_for_all(cfg: RunConfig, items: ItemTable, exp: Expansion, total: int, out: storage.RunStorage) -> int:
    """Check that every request of the run is committed; one the pipeline never returned is committed as an
    error row (class transient: ``--resume`` runs it again). Returns how many were lost. The markers' index
    says how many are committed; only when some are missing are the requests expanded again to find them."""
    if commit.committed_count(out.root) >= total:
        return 0
    committed = commit.load_index(out.root).request_ids
    lost = [r for r in iter_requests(cfg, items, exp) if r["request_id"] not in committed]
    log.error("pipeline: %d request(s) came back without any row; recorded as error rows", len(lost))
    for i in range(0, len(lost), commit.SHARD_ROWS):
        commit.commit_shard(out, [{**r, "chunk_index": 0, "n_chunks": 1, "error_stage": "pipeline",
                                   "error_class": TRANSIENT, "error": "lost: no row came back from the pipeline"}
                                  for r in lost[i:i + commit.SHARD_ROWS]])
    return len(lost)


def scorer_params(cfg: RunConfig, model_infos: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """protocol instance → scorer keyword arguments: the free-form metrics config, the run's S3 options (for
    s3:// model files) and which models are reference-rewrite systems (by their recorded model_info)."""
    from evalcore.metrics.freeform import rewrite_roles

    params: dict[str, dict[str, Any]] = {}
    for p in cfg.protocols:
        if p.kind == "freeform":
            params[p.name] = {"metrics": p.freeform_metrics(), "rewrites": rewrite_roles(model_infos),
                              "s3": cfg.storage.s3.model_dump()}
    return params


def protocols_meta(cfg: RunConfig) -> dict[str, dict[str, Any]]:
    """protocol instance → what the report needs of its config (kind, breakdown share), for run.json."""
    return {p.name: {"kind": p.kind, "breakdown_min_share": p.breakdown_min_share} for p in cfg.protocols}


def finish(cfg: RunConfig, items_in: int, item_errors: list[dict], judged: list[dict] | None = None,
           warnings: list[str] | None = None, empty: list[str] | None = None,
           attempt: dict[str, int] | None = None) -> RunResult:
    """Stage 6: per-item and summary tables, errors, run.json and report.md (with the data ``warnings``).

    A request its protocol's scorer cannot score (e.g. a free-form answer the metrics reject) becomes an
    error row of stage ``score`` here, counted with the others. ``empty``: the configured protocols left
    without a valid item (a warning in the report and the log; an error under ``max_error_rate``). Raises
    :class:`NothingScored` or :class:`ErrorBudgetExceeded` after everything is written."""
    root = cfg.root
    out = storage.RunStorage(root)
    tables = storage.join(root, "tables")
    rows_per_group = group_rows(cfg)
    if judged is None and rows_per_group is None:
        judged = commit.load_committed(root).rows
    if judged is not None:
        models: dict[str, Any] = {}
        for r in judged:
            if r.get("model_info") and r["model"] not in models:
                models[r["model"]] = r["model_info"]
    else:
        models = commit.model_infos(root, [m.name for m in cfg.models])
    params = scorer_params(cfg, models)
    if any(p.kind == "freeform" and uses_ray(p.freeform_metrics()) for p in cfg.protocols):
        init_ray(cfg)  # CLAPText embeds on Ray actors (the driver may not have started Ray: all rows committed)
    groups = [judged] if judged is not None else commit.iter_committed(root, rows_per_group)
    reduced = reduce_rows(groups, params, storage.join(tables, "per_item.parquet"), out, keep_rows=judged is not None)
    summary = summary_table(reduced.per_item, cfg.stats.bootstrap_resamples, cfg.stats.confidence,
                            cfg.seeds.bootstrap, params, errors=reduced.errors)
    errors = conform([{**e, "error": bounded(e.get("error"))} for e in item_errors + error_rows(reduced.errors)],
                     ERRORS)
    if judged is not None:
        agree, agree_rows, agree_left_out = agreement(cfg, judged, reduced.rows)
        if agree_rows:  # agreement_judge, if any
            summary = pa.concat_tables([summary, pa.Table.from_pylist(agree_rows, schema=summary.schema)])
            out.write_parquet(pa.Table.from_pandas(agree, preserve_index=False),
                              storage.join(tables, "agreement.parquet"))
            log.info("agreement: %d requests compared, %d left out (second judgment failed)", len(agree),
                     agree_left_out)
    out.write_parquet(summary, storage.join(tables, "summary.parquet"))
    out.write_parquet(errors, storage.join(tables, "errors.parquet"))
    c = reduced.counts(items_in, len(item_errors))
    c["protocols_without_items"] = list(empty or [])
    for line in c["protocols_without_items"]:
        log.warning("WARNING: %s: its section is missing from the report (see the item errors)", line)
    if reduced.labels_dropped is not None:
        c["labels_dropped"] = reduced.labels_dropped  # out-of-vocabulary terms, never scored
    meta = {"name": cfg.name, "version": evalcore.__version__, "root": root,
            "created": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "resamples": cfg.stats.bootstrap_resamples, "confidence": cfg.stats.confidence,
            "seed": cfg.seeds.bootstrap, "min_items": cfg.stats.min_items, "models": models,
            "protocols": protocols_meta(cfg), "warnings": list(warnings or []), "reproduces": cfg.reproduces}
    out.write_text(storage.join(root, "run.json"), json.dumps({**meta, "counts": c, "attempt": attempt or {},
                                                               "scoring": reduced.provenance}, indent=2, default=str))
    beside = reproduction(cfg, summary.to_pandas(), out, tables)
    report, verdicts = write_reports(out.write_text, root, meta, c, summary.to_pandas(), errors.to_pandas(), beside)
    result = RunResult(root=root, counts=c, report=report, verdicts=verdicts, attempt=attempt or {})
    check_scored(result, reduced.errors, item_errors)  # after the tables and report are written
    check_error_budget(result, reduced.errors, cfg.max_error_rate, item_errors=item_errors)
    return result


def reproduction(cfg: RunConfig, summary: pd.DataFrame, out: storage.RunStorage, tables: str) -> str:
    """With ``reproduces``: tables/reproduction.parquet (each published cell beside ours) and its report section."""
    if cfg.reproduces is None:
        return ""
    from evalcore.reports import published, reproduction as beside

    cells = published.cells_of(cfg.reproduces, published.read(cfg.published_values or published.PUBLISHED_CSV))
    rep = beside.reproduction(summary, cells)
    out.write_parquet(pa.Table.from_pandas(rep, preserve_index=False), storage.join(tables, "reproduction.parquet"))
    return beside.section(rep, cfg.reproduces, cfg.stats.confidence)


def write_reports(write_text: Callable[[str, str], None], root: str, meta: dict[str, Any], c: dict[str, Any],
                  summary: pd.DataFrame, errors: pd.DataFrame, beside: str = "") -> tuple[str, list[str]]:
    """report.md and report.html under ``root`` (``beside``: the run beside the paper, appended); returns the
    Markdown and the verdict line per model."""
    report = markdown.render(meta, c, summary, errors) + beside
    write_text(storage.join(root, "report.md"), report)
    min_items, rewrites = int(meta.get("min_items") or verdict.MIN_ITEMS), markdown.rewrite_models(meta)
    write_text(storage.join(root, "report.html"), report_html.render(report, markdown.with_kinds(summary), min_items,
                                                                     rewrites))
    return report, verdict.verdict_lines(summary, min_items, rewrites)


def rerender(root: str) -> str:
    """Render report.md and report.html again from a finished run's tables (``evalcore report``)."""
    meta = json.loads(storage.read_text(storage.join(root, "run.json")))
    c = meta.pop("counts")
    summary = storage.read_parquet(storage.join(root, "tables", "summary.parquet")).to_pandas()
    errors = storage.read_parquet(storage.join(root, "tables", "errors.parquet")).to_pandas()
    beside, rep_uri = "", storage.join(root, "tables", "reproduction.parquet")
    if meta.get("reproduces") and storage.exists(rep_uri):
        from evalcore.reports.reproduction import section

        beside = section(storage.read_parquet(rep_uri).to_pandas(), meta["reproduces"], float(meta["confidence"]))
    return write_reports(storage.write_text, root, meta, c, summary, errors, beside)[0]
