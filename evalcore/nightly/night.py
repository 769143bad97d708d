"""One night: discover each series' checkpoints, evaluate the new ones, compare, write the dashboard.

    discover (series.py) → pick: not finished, not failed max_attempts times, newest first, at most
    max_new_per_night per series → claim a lease (ledger.py) → run the ordinary pipeline into
    <root>/runs/<series>/<checkpoint>/ (resuming an interrupted run) → ledger record → compare (compare.py)
    → regressions.parquet, history.parquet, ledger.parquet → dashboard.html / dashboard.md

A checkpoint that fails (cannot be loaded, errors past the error budget, crashes) is recorded ``failed``
with its reason and never stops the others.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa

from evalcore import storage
from evalcore.config import ConfigError
from evalcore.errors import bounded
from evalcore.nightly import compare, series as discovery
from evalcore.nightly.config import NightlyConfig, SeriesConfig, run_config
from evalcore.nightly.ledger import Ledger, iso, new_owner, now

log = logging.getLogger("evalcore")

REGRESSION_COLUMNS = ["series", "checkpoint", "reference", "reference_role", "protocol", "dataset", "condition",
                      "variant", "metric", "group", "direction", "n", "reference_value", "value", "delta", "ci_low",
                      "ci_high", "p_value", "p_adjusted", "correction", "min_effect", "flagged"]
SERIES_ROW = "_series"  # the ledger row of a series whose prefix lists no checkpoint
FLAG_PRINT = ["series", "checkpoint", "reference", "protocol", "dataset", "condition", "variant", "metric", "group",
              "delta", "ci_low", "ci_high", "p_adjusted"]


@dataclass
class NightResult:
    """What one night did."""

    root: str
    evaluated: list[str] = field(default_factory=list)  # "<series>/<checkpoint>" run tonight
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # leased by another nightly
    requests_run: int = 0  # requests of the runs evaluated tonight
    notes: list[str] = field(default_factory=list)
    regressions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REGRESSION_COLUMNS))

    @property
    def flagged(self) -> pd.DataFrame:
        return self.regressions[self.regressions["flagged"].astype(bool)] if len(self.regressions) else self.regressions


def run_root(root: str, series: str, checkpoint: str) -> str:
    return storage.join(root, "runs", series, checkpoint)


def pick(cfg: NightlyConfig, ledger: Ledger, cps: list[discovery.Checkpoint]) -> list[discovery.Checkpoint]:
    """The checkpoints to evaluate tonight: ready, not finished, attempts left; newest first, at most N."""
    todo = []
    for cp in reversed(cps):
        rec = ledger.get(cp.series, cp.name)
        if cp.problem is not None:
            if rec is None or rec.get("status") == "waiting":
                ledger.put({**(rec or {}), "series": cp.series, "checkpoint": cp.name, "uri": cp.uri,
                            "status": "waiting", "reason": cp.problem, "attempts": (rec or {}).get("attempts", 0)})
            continue
        if rec is not None and (rec.get("status") == "finished"
                                or (rec.get("status") == "failed" and rec.get("attempts", 0) >= cfg.max_attempts)):
            continue
        todo.append(cp)
    return todo[:cfg.max_new_per_night]


def evaluate(cfg: NightlyConfig, s: SeriesConfig, cp: discovery.Checkpoint, ledger: Ledger, owner: str,
             result: NightResult) -> None:
    """Evaluate one claimed checkpoint with the run pipeline and record the outcome in the ledger."""
    from evalcore.pipeline.commit import RunStateError
    from evalcore.pipeline.run import RunUnscored, run as run_pipeline

    rec = ledger.get(s.name, cp.name) or {}
    if rec.get("status") == "finished" or (rec.get("status") == "failed"
                                           and rec.get("attempts", 0) >= cfg.max_attempts):
        return  # another nightly finished it (or used its last attempt) between pick and claim
    root = run_root(cfg.root, s.name, cp.name)
    attempts = int(rec.get("attempts", 0)) + 1
    last = rec.get("reason") if rec.get("status") == "failed" else rec.get("last_failure")
    rec = ledger.put({**rec, "series": s.name, "checkpoint": cp.name, "uri": cp.uri, "run_root": root,
                      "status": "running", "reason": None, "last_failure": last, "attempts": attempts,
                      "started": iso(now()), "owner": owner})
    key = f"{s.name}/{cp.name}"
    try:
        rcfg = run_config(cfg, s, cp.name, cp.uri, root)
        resume = storage.exists(storage.join(root, "config.yaml"))
        log.info("nightly: %s %s → %s", "resume" if resume else "evaluate", cp.uri, root)
        with ledger.holding(s.name, cp.name, owner, cfg.lease_seconds):
            out = run_pipeline(rcfg, resume=resume)
        result.requests_run += int(out.counts.get("requests_in", 0))
        rec = ledger.put({**rec, "status": "finished", "reason": None, "finished": iso(now()),
                          "identity": identity(root, s.name),
                          "suite_fingerprint": compare.suite_fingerprint(root)})
        result.evaluated.append(key)
    except (ConfigError, RunStateError, RunUnscored) as e:  # cannot load, bad checkpoint, past the error budget
        fail(ledger, rec, f"{type(e).__name__}: {e}", result, key)
    except Exception as e:  # noqa: BLE001 - a crash: recorded, retried next night (resuming), others go on
        log.debug("nightly: %s failed", key, exc_info=True)
        fail(ledger, rec, f"{type(e).__name__}: {e}", result, key)


def fail(ledger: Ledger, rec: dict, reason: str, result: NightResult, key: str) -> None:
    ledger.put({**rec, "status": "failed", "reason": bounded(reason, 1000), "finished": iso(now())})
    result.failed.append(key)
    log.warning("nightly: %s failed: %s", key, bounded(reason, 300))


def identity(root: str, model: str) -> dict | None:
    """The checkpoint identity the run recorded (``model_info`` of its responses: uri + sha256 / revision)."""
    import json

    meta = json.loads(storage.read_text(storage.join(root, "run.json")))
    info = meta.get("models", {}).get(model)
    info = json.loads(info) if isinstance(info, str) else info
    ck = (info or {}).get("checkpoint")
    return ck if isinstance(ck, dict) else {"checkpoint": ck}


def start_cluster(cfg: NightlyConfig, attempts: int = 3) -> None:
    """Ray for the night's runs (as ``evalcore run`` starts it), tried ``attempts`` times: a local node can time
    out starting on a loaded machine."""
    import ray

    from evalcore.pipeline.run import init_ray

    for i in range(attempts):
        if ray.is_initialized():
            return
        try:
            init_ray(cfg)  # type: ignore[arg-type]  (it reads cfg.ray only)
            return
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception when its node times out starting
            if i == attempts - 1:
                raise
            log.warning("nightly: Ray did not start (%s: %s); trying again", type(e).__name__, bounded(e, 300))
            ray.shutdown()
            time.sleep(5)


def series_record(ledger: Ledger, s: SeriesConfig, problem: str | None, result: NightResult) -> None:
    """The series' own ledger row (checkpoint ``_series``): written while its prefix is empty or unreadable,
    removed once it lists checkpoints."""
    if problem is None:
        if ledger.get(s.name, SERIES_ROW) is not None:
            storage.delete(ledger.path(s.name, SERIES_ROW))
        return
    result.notes.append(problem)
    ledger.put({"series": s.name, "checkpoint": SERIES_ROW, "uri": s.prefix, "status": "waiting", "reason": problem,
                "attempts": 0})


def night(cfg: NightlyConfig, owner: str | None = None) -> NightResult:
    """Run one night over every series of ``cfg``; returns what it did (the files are under ``cfg.root``)."""
    storage.configure_s3(storage.S3Options(**cfg.storage.s3.model_dump()))
    storage.configure_reads(cfg.storage.read_timeout_s)
    owner = owner or new_owner()
    ledger = Ledger(cfg.root)
    result = NightResult(root=cfg.root)
    for s in cfg.series:
        try:
            cps = discovery.discover(s)
        except discovery.SeriesUnreadable as e:
            cps, problem = [], str(e)
        else:
            problem = None if cps else f"series {s.name}: no checkpoints under {s.prefix}"
        series_record(ledger, s, problem, result)
        for cp in pick(cfg, ledger, cps):
            start_cluster(cfg)  # a cluster that will not start fails the night, not a checkpoint
            if not ledger.claim(s.name, cp.name, owner, cfg.lease_seconds, cfg.lease_settle_seconds):
                result.skipped.append(f"{s.name}/{cp.name}")
                log.info("nightly: %s/%s is leased by another nightly; skipped", s.name, cp.name)
                continue
            try:
                evaluate(cfg, s, cp, ledger, owner, result)
            finally:
                ledger.release(s.name, cp.name, owner)
    summarize(cfg, ledger, result)
    return result


def summarize(cfg: NightlyConfig, ledger: Ledger, result: NightResult) -> None:
    """Comparisons, history, ledger view and dashboard from every finished checkpoint."""
    from evalcore.nightly import history
    from evalcore.reports import trends

    t = time.perf_counter()
    records = ledger.records()
    out = cfg.root
    key = compare.digest([cfg.model_dump(mode="json"), result.notes,
                           sorted(({k: v for k, v in r.items() if k not in ("updated", "owner")} for r in records),
                                  key=lambda r: (r.get("series"), r.get("checkpoint")))])
    key_uri = storage.join(out, "dashboard.key")
    if storage.exists(key_uri) and storage.read_text(key_uri) == key:  # nothing changed since the last night
        result.regressions = storage.read_parquet(storage.join(out, "regressions.parquet")).to_pandas()
        log.info("nightly: no change since the last night; dashboard kept (%.1f s)", time.perf_counter() - t)
        return
    regressions, notes = history.regressions(cfg, records)
    result.regressions = regressions
    result.notes += notes
    hist = history.history(cfg, records)
    storage.write_parquet(pa.Table.from_pandas(regressions[REGRESSION_COLUMNS], preserve_index=False),
                          storage.join(out, "regressions.parquet"))
    storage.write_parquet(pa.Table.from_pandas(hist, preserve_index=False), storage.join(out, "history.parquet"))
    storage.write_parquet(ledger.table(), storage.join(out, "ledger.parquet"))
    html, md = trends.dashboard(cfg.name, regressions, hist, records, result.notes)
    storage.write_text(storage.join(out, "dashboard.html"), html)
    storage.write_text(storage.join(out, "dashboard.md"), md)
    storage.write_text(key_uri, key)
    log.info("nightly: compared and rendered in %.1f s", time.perf_counter() - t)
