"""The evaluation pipeline, as a list of stages.

    read items → expand requests → [per model] fetch+decode+chunk → model actor pool
    → judge → commit responses/judgments (Parquet shards) → score → summary → report → trackers

This module holds the stages on the driver and :func:`run`, which strings them together. Ray Data streams
requests through decode, model and judge stages (:mod:`evalcore.pipeline.graph`, sized by
:mod:`evalcore.pipeline.resources`); decoded audio exists only between the decode stage and the model's actor pool.
Items and judged rows are committed as they come (:mod:`evalcore.pipeline.commit`), so ``run(cfg, resume=True)``
finishes a killed run without repeating committed work (:mod:`evalcore.pipeline.resume`); the tables and reports
are written last (:mod:`evalcore.pipeline.finish`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from typing import Any, Iterable

from evalcore.core import cluster, storage

from evalcore.reports import console

from evalcore.runconfig import preflight
from evalcore.runconfig.config import ConfigError, RunConfig
from evalcore.datasets.base import DATASETS, DatasetContext
from evalcore.core.item_table import SLICE_ROWS, ItemTable
from evalcore.datasets.validate import validated
from evalcore.core.errors import RETRY_BY_DEFAULT, TRANSIENT
from evalcore.pipeline import commit
from evalcore.pipeline.finish import finish
from evalcore.pipeline.graph import GraphSettings, init_ray, judged_batches, rejudged_batches
from evalcore.pipeline.llm_resources import hold_budgets, with_run_llm_roots
from evalcore.pipeline import placement
from evalcore.pipeline.outcome import RunResult, protocols_without_items
from evalcore.pipeline.outcome import ErrorBudgetExceeded, NothingScored, RunUnscored, error_reason  # noqa: F401 (API)
from evalcore.pipeline.profile import Profile
from evalcore.pipeline.resume import open_run, rejudged_rows, retried_requests
from evalcore.pipeline.stream_metrics import SCORE_POOL_FROM
from evalcore.pipeline.sources import RequestPlan, plan_requests, reject_disallowed_audio, request_source  # noqa: F401
from evalcore.protocols import checks
from evalcore.pipeline.paraphrases import paraphrases
from evalcore.protocols.requests import Expansion, expansion, iter_requests
from evalcore.tracking.process import beside
from evalcore.runconfig.vocab_fit import default_judge

log = logging.getLogger("evalcore")


# ----------------------------------------------------------------------------- stages on the driver


def read_items(cfg: RunConfig) -> tuple[ItemTable, list[dict], int]:
    """Stage 1: every dataset's items, validated, audio paths made absolute here on the driver, factual labels
    checked against the judge's vocabulary → (items, error rows, rows read). Items are held as an Arrow table,
    converted a slice at a time as they are validated."""
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
            for p in cfg.protocols if p.kind_spec.labels_in_vocabulary and p.name in judges]



def protocol_judges(cfg: RunConfig) -> dict[str, tuple[str, str]]:
    """protocol instance → (judge kind, params JSON): the configured judge, else its kind's default, fitted to
    the tasks of its datasets (:func:`evalcore.runconfig.vocab_fit.default_judge`): factual and MCQ answers
    are never left unjudged, nor read into another task's vocabulary."""
    return {p.name: (j.kind, json.dumps(j.params, sort_keys=True))
            for p in cfg.protocols if (j := p.judge or default_judge(cfg, p)) is not None}


def items_stage(cfg: RunConfig, out: storage.RunStorage,
                at: placement.Nodes | None = None) -> tuple[ItemTable, list[dict], int]:
    """Stage 1 with its commit: the committed items of the run if any, else read, validate and commit. On a
    cluster of several nodes (``at``), audio that not every node reaches is refused before it is committed."""
    loaded = commit.load_items(cfg.root)
    fresh = loaded is None
    if fresh:
        loaded = read_items(cfg)
    if at is not None and (found := placement.audio_problems(cfg, loaded[0].table, at)):
        raise ConfigError("the run's inputs are not where every node of the cluster reads them:\n"
                          + "\n".join(f"  {line}" for line in found))
    if fresh:
        commit.commit_items(out, *loaded)
    items, item_errors, n_items_in = loaded
    log.info("items: %d read, %d valid, %d errored", n_items_in, len(items), len(item_errors))
    return items, item_errors, n_items_in


def cluster_view(cfg: RunConfig) -> placement.Nodes | None:
    """The Ray cluster the run joins, seen before anything is written (:mod:`evalcore.pipeline.placement`): one
    named by ``ray.address`` or ``$RAY_ADDRESS`` is joined now, and one already up in this process is read; None
    when the run will start a new local cluster (one node, the driver's)."""
    import ray

    if not ray.is_initialized() and cluster.address_of(cfg.ray.address) == "local":
        return None
    init_ray(cfg.ray)
    return placement.nodes()


def check_placement(cfg: RunConfig, at: placement.Nodes | None) -> None:
    """Raise :class:`ConfigError` naming each file a worker on another node would not reach."""
    if at is not None and (found := placement.config_problems(cfg, at)):
        raise ConfigError("files every node of the cluster reads are on a local path:\n"
                          + "\n".join(f"  {line}" for line in found))


def account_for_all(cfg: RunConfig, items: ItemTable, exp: Expansion, total: int, out: storage.RunStorage,
                    attempt: int = 0, again: frozenset[str] = frozenset()) -> int:
    """Check that every request of the run is committed; one the pipeline never returned is committed as an
    error row of this ``attempt`` (class transient: ``--resume`` runs it again). Returns how many were lost. A
    request this attempt ran ``again`` (a resume's retried errors) counts only once this attempt committed it: its
    earlier rows are what it was run again for. The markers' index says how many are committed; only when some are
    missing are the requests expanded again to find them."""
    if not again and commit.committed_count(out.root) >= total:
        return 0
    index = commit.load_index(out.root)
    committed = {rid for rid in index.request_ids if rid not in again or index.attempt_of.get(rid, 0) >= attempt}
    if len(committed) >= total:
        return 0
    lost = [r for r in iter_requests(cfg, items, exp) if r["request_id"] not in committed]
    log.error("pipeline: %d request(s) came back without any row; recorded as error rows", len(lost))
    for i in range(0, len(lost), commit.SHARD_ROWS):
        commit.commit_shard(out, [{**r, "chunk_index": 0, "n_chunks": 1, "error_stage": "pipeline",
                                   "error_class": TRANSIENT, "error": "lost: no row came back from the pipeline"}
                                  for r in lost[i:i + commit.SHARD_ROWS]], attempt)
    return len(lost)


# ----------------------------------------------------------------------------- the run


@storage.scoped(lambda cfg, *_, **__: cfg.storage.settings())  # the run's S3 options and read deadline, in its calls
def run(cfg: RunConfig, resume: bool = False, commit_every_s: float = commit.COMMIT_SECONDS,
        retry_errors: Iterable[str] = RETRY_BY_DEFAULT, ping: bool = False) -> RunResult:
    """Run the whole evaluation described by ``cfg``; returns where it wrote and its counts.

    Outputs are committed shard by shard (:mod:`evalcore.pipeline.commit`). ``resume`` continues a killed
    or failed run at ``cfg.root``: committed requests are not sent to any model or judge again, except
    those committed as error rows of a class in ``retry_errors`` (default: transient), which run again —
    a request that failed only in its judge is judged again on its committed answer, without its model.
    ``ping``: call each LLM endpoint once before anything runs (:func:`evalcore.runconfig.preflight.check_endpoints`)."""
    preflight.check(cfg, datasets=not resume)  # a missing file or checkpoint fails here, before Ray and any model
    if ping:
        preflight.check_endpoints(cfg)  # an endpoint down, a refused key, an unknown model: before Ray too
    at = cluster_view(cfg)  # a cluster to join: its nodes share no disk (docs/cluster.md)
    rooted = with_run_llm_roots(cfg)  # LLM caches and logs default to the run's root (not saved in its config)
    check_placement(rooted, at)  # what workers read on another node must be where they reach it: before any write
    out = open_run(cfg, resume)  # every write of the run goes through it: nothing lands outside the root
    cfg = rooted

    profile = Profile()  # where the time goes, stage by stage (run.json, the closing lines, the report's run section)

    # 1. items (read once per run: a resumed run uses the committed items)
    with profile.driver("items") as rows:
        items, item_errors, n_items_in = items_stage(cfg, out, at)
        rows.update(rows_in=n_items_in, rows_out=len(items))
    judges = factual_judges(cfg)
    warnings = checks.warnings(items, {}, outside=sum((checks.check_instances(chunk, judges)[2]
                                                       for chunk in items.chunks()), Counter()))
    for w in warnings:
        log.warning("items: %s", w)

    # 2. requests, minus those an earlier attempt committed: counted in one pass on the driver, produced on Ray
    earlier = Earlier.of(cfg.root, resume, set(retry_errors))
    exp = expansion(cfg, items, paraphrases(cfg, items, out))  # the paraphrase conditions' wording, made once
    if earlier.done:  # committed ids the run cannot produce mean the run changed: refused before anything is written
        check_committed(cfg.root, plan_requests(cfg, items, exp, earlier.done, earlier.again), len(earlier.done))

    # 3–5. decode → model → judge → score → commit on Ray; the driver commits what cannot be formed
    plan = run_requests(cfg, out, items, exp, earlier, profile, commit_every_s)
    account_for_all(cfg, items, exp, plan.total, out, earlier.index.next_attempt, frozenset(earlier.retried))

    # 6. score and report over every committed row; the error budget is checked after both are written
    attempt = {"requests_sent": plan.to_run, "requests_rejudged": plan.rejudged,
               "requests_committed_earlier": plan.committed}
    # 7. the configured trackers log from a process of their own: their stores opened while the run scores, the
    # tables logged while it renders the report, the report when it is written (a failing one is a warning, never
    # the run's failure; a run that fails marks their runs failed)
    with beside(cfg.tracking, cfg.root) as tracking:
        result = finish(cfg, items_in=n_items_in, item_errors=item_errors, warnings=warnings,
                        empty=protocols_without_items(cfg, items), attempt=attempt, profile=profile,
                        on_tables=tracking.tables_written)
    if not cfg.tracking:
        return result
    log.info("tracking: the run waited %.1f s for its trackers after its report", tracking.waited_s)
    return dataclasses.replace(result, tracking_wait_s=tracking.waited_s)


@dataclasses.dataclass(frozen=True)
class Earlier:
    """What earlier attempts committed (``index``) and what of it this attempt runs again: ``retried`` (request →
    its committed rows, for each with an error row of a class in ``classes``), ``rejudge`` (the rows of those that
    only their judge failed, judged again on their committed answer; ``again``: their ids), ``done`` (the rest)."""

    index: commit.CommitIndex
    classes: frozenset[str]
    retried: dict[str, list[dict]]
    rejudge: list[dict]
    again: set[str]
    done: set[str]

    @classmethod
    def of(cls, root: str, resume: bool, classes: set[str]) -> Earlier:
        """Read from the markers' indexes at ``root`` (nothing when not ``resume``): only the shards of requests
        run again are read."""
        index = commit.load_index(root) if resume else commit.CommitIndex({}, {})
        again_ids = index.with_errors(classes) if resume else set()
        retried = retried_requests(commit.load_requests(root, index, again_ids), classes) if again_ids else {}
        rejudge = rejudged_rows(retried)
        return cls(index, frozenset(classes), retried, rejudge, {r["request_id"] for r in rejudge},
                   index.request_ids - set(retried))


def run_requests(cfg: RunConfig, out: storage.RunStorage, items: ItemTable, exp: Expansion, earlier: Earlier,
                 profile: Profile, commit_every_s: float) -> RequestPlan:
    """Stages 2–5: plan the requests not ``earlier`` done, commit those that cannot be formed, judge ``earlier``'s
    rejudged rows again, and stream the rest through decode → model → judge → score → commit on Ray."""
    with commit.ShardWriter(out, attempt=earlier.index.next_attempt, every_s=commit_every_s) as writer:
        with profile.driver("requests") as rows:
            plan = plan_requests(cfg, items, exp, earlier.done, earlier.again,
                                 on_unformed=lambda r: writer.add([{**r, "chunk_index": 0, "n_chunks": 1}]))
            rows.update(rows_in=len(items), rows_out=plan.total)
        if plan.outside:
            log.warning("requests: %d with audio outside storage.allowed_audio_roots (error rows)", plan.outside)
        log.info("requests: %d (%d could not be formed; %d committed earlier, %d to run)",
                 plan.total, plan.unformed, plan.committed, plan.to_run + plan.rejudged)
        if earlier.retried:
            log.info("resume: %d committed error row(s) of class %s run again (%d judged again on their committed "
                     "answer)", len(earlier.retried), "/".join(sorted(earlier.classes)), len(earlier.again))
        if plan.to_run or earlier.rejudge:
            init_ray(cfg.ray)
            budgets = hold_budgets(cfg)  # named rate budgets live as long as the driver holds them
            graph = GraphSettings.of(cfg, protocol_judges(cfg))
            for batch in rejudged_batches(graph, earlier.rejudge):
                writer.add_stream(batch)
            streams = judged_batches(graph, sources(cfg, items, exp, plan, earlier.done | earlier.again),
                                     writer.attempt, commit.worker_shard_rows(plan.to_run),
                                     plan.to_run >= SCORE_POOL_FROM, plan.ready, profile, commit_every_s,
                                     plan.sounds)
            for batch in console.tallied(streams, plan.to_run, cfg.ray.progress_bars):
                writer.add_stream(batch)
            del budgets
    return plan


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
