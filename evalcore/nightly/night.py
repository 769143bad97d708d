"""One night: discover each series' checkpoints, evaluate the new ones, compare, write the dashboard.

    discover (series.py) → pick: not finished, not failed max_attempts times, newest first, at most
    max_new_per_night per series → claim a lease (lease.py: a conditional write) → run the ordinary pipeline
    into <root>/runs/<series>/<checkpoint>/ (resuming an interrupted run) → ledger record under the lease →
    compare (compare.py) → regressions.parquet, history.parquet, ledger.parquet → tonight's verdicts
    (tonight.py) → dashboard.html / dashboard.md, nightly.json, the webhook → the trackers, once per checkpoint
    evaluated tonight (tracked.py)

A checkpoint that fails (cannot be loaded, errors past the error budget, crashes) is recorded ``failed``
with its reason and never stops the others. A nightly that loses a checkpoint's lease (it stalled past
``lease_seconds`` and another nightly took the checkpoint over) stops: its pipeline at the next commit
(:mod:`evalcore.pipeline.attempts`), its night there, writing nothing shared afterwards (no comparisons, dashboard,
``nightly.json`` nor webhook: the nightly that took over writes them); ``evalcore nightly`` then exits 1 saying so.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

import pandas as pd
import pyarrow as pa

from evalcore.core import storage
from evalcore.runconfig.config import ConfigError
from evalcore.core.errors import bounded
from evalcore.nightly import compare, evidence, history, leaderboard, series as discovery, tonight as tn, tracked
from evalcore.nightly.compare import REGRESSION_COLUMNS
from evalcore.nightly.config import NightlyConfig, SeriesConfig, run_config
from evalcore.nightly.lease import Lease, LeaseLost, Leases, new_owner
from evalcore.nightly.ledger import Ledger, iso, now
from evalcore.core.nightly_outcome import CheckpointKey, CheckpointVerdict, Counts, LedgerRecord, Outcome, Seen, Status, \
    Tonight, Verdict
from evalcore.pipeline.commit import RunStateError
from evalcore.pipeline.graph import init_ray
from evalcore.reports import dashboard

log = logging.getLogger("evalcore")

#: bumped when the comparison tables change shape: a night after an upgrade computes them again
TABLES_VERSION = 3
SERIES_ROW = "_series"  # the ledger row of a series whose prefix lists no checkpoint
FLAG_PRINT = ["series", "checkpoint", "reference", "protocol", "dataset", "condition", "variant", "metric", "group",
              "delta", "ci_low", "ci_high", "p_adjusted"]


@dataclass
class NightResult:
    """What one night did."""

    root: str
    started: float = field(default_factory=now)
    #: every checkpoint tonight evaluated, failed, found leased or not ready, or lost (its lease taken over by
    #: another nightly mid-evaluation, this one having stalled past ``lease_seconds``: the night stops there and
    #: writes nothing shared), in the order seen
    seen: list[Seen] = field(default_factory=list)
    requests_sent: int = 0  # sent to models tonight
    requests_committed_earlier: int = 0  # committed by an interrupted attempt: resumed, not sent again
    requests_errored: int = 0  # error rows of the runs finished tonight
    notes: list[str] = field(default_factory=list)
    store: str | None = None  # why this store's leases fall back to write-settle-read (None: atomic)
    regressions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REGRESSION_COLUMNS))
    tonight: Tonight | None = None

    def add(self, key: CheckpointKey, outcome: Outcome, reason: str | None = None, resumed: bool = False,
            profile: dict | None = None) -> None:
        self.seen.append(Seen(key, outcome, resumed, reason, profile))

    def keys(self, outcome: Outcome) -> list[CheckpointKey]:
        """The checkpoints of one outcome tonight, in the order seen."""
        return [s.key for s in self.seen if s.outcome is outcome]

    @property
    def evaluated(self) -> list[CheckpointKey]:
        """Finished tonight, new or resumed."""
        return self.keys(Outcome.EVALUATED)

    @property
    def failed(self) -> list[CheckpointKey]:
        return self.keys(Outcome.FAILED)

    @property
    def lost(self) -> list[CheckpointKey]:
        return self.keys(Outcome.LOST)

    @property
    def flagged(self) -> pd.DataFrame:
        """Every flagged comparison, old nights' included (the dashboard's history)."""
        return self.regressions[self.regressions["flagged"].astype(bool)] if len(self.regressions) else self.regressions

    @property
    def flagged_tonight(self) -> pd.DataFrame:
        """The flagged comparisons of the checkpoints evaluated tonight: these alone decide the exit code."""
        return tn.flagged_tonight(self.regressions, self.evaluated)

    @property
    def exit_code(self) -> int:
        return self.tonight.exit_code if self.tonight is not None else 0


def run_root(root: str, series: str, checkpoint: str) -> str:
    return storage.join(root, "runs", series, checkpoint)


def pick(cfg: NightlyConfig, ledger: Ledger, cps: list[discovery.Checkpoint],
         result: NightResult | None = None) -> list[discovery.Checkpoint]:
    """The checkpoints to evaluate tonight: ready, not finished, attempts left; newest first, at most N."""
    todo = []
    for cp in reversed(cps):
        rec = ledger.get(cp.key.series, cp.name)
        if cp.problem is not None:
            if rec is None or rec.status is Status.WAITING:
                waiting = LedgerRecord(cp.key.series, cp.name, Status.WAITING)
                ledger.put((rec or waiting).but(uri=cp.uri, status=Status.WAITING, reason=cp.problem))
                if result is not None:
                    result.add(cp.key, Outcome.WAITING, cp.problem)
            continue
        if rec is not None and done(cfg, rec):
            continue
        todo.append(cp)
    return todo[:cfg.max_new_per_night]


def done(cfg: NightlyConfig, rec: LedgerRecord) -> bool:
    """Whether a checkpoint needs no evaluation: finished, or failed ``max_attempts`` times."""
    return rec.status is Status.FINISHED or (rec.status is Status.FAILED and rec.attempts >= cfg.max_attempts)


def evaluate(cfg: NightlyConfig, s: SeriesConfig, cp: discovery.Checkpoint, ledger: Ledger, lease: Lease,
             result: NightResult) -> None:
    """Evaluate one claimed checkpoint with the run pipeline and record the outcome in the ledger (every
    record written under ``lease``: refused once another nightly has taken it over)."""
    from evalcore.pipeline.run import RunUnscored, run as run_pipeline  # heavy: pulls matplotlib (reports)

    key = cp.key
    rec = ledger.get(s.name, cp.name)
    if rec is not None and done(cfg, rec):
        return  # another nightly finished it (or used its last attempt) between pick and claim
    rec = rec or LedgerRecord(s.name, cp.name, Status.RUNNING)
    root = run_root(cfg.root, s.name, cp.name)
    last = rec.reason if rec.status is Status.FAILED else rec.last_failure
    try:
        rec = ledger.put(rec.but(uri=cp.uri, run_root=root, status=Status.RUNNING, reason=None, last_failure=last,
                                 attempts=rec.attempts + 1, started=iso(now()), owner=lease.owner), lease)
        try:
            rcfg = run_config(cfg, s, cp.name, cp.uri, root)
            resume = storage.exists(storage.join(root, "config.yaml"))
            log.info("nightly: %s %s → %s", "resume" if resume else "evaluate", cp.uri, root)
            with ledger.holding(lease):
                out = run_pipeline(rcfg, resume=resume)
        except (ConfigError, RunStateError, RunUnscored) as e:  # cannot load, bad checkpoint, past the error budget
            count(result, getattr(e, "result", None))
            finished = getattr(e, "result", None) is not None  # past the error budget: its profile
            fail(ledger, rec, lease, f"{type(e).__name__}: {e}", result, key,
                 profile=note_profile(key, root) if finished else None)
            return
        except Exception as e:  # noqa: BLE001 - a crash: recorded, retried next night (resuming), others go on
            log.debug("nightly: %s failed", key, exc_info=True)
            fail(ledger, rec, lease, f"{type(e).__name__}: {e}", result, key)
            return
        ledger.put(rec.but(status=Status.FINISHED, reason=None, finished=iso(now()), identity=identity(root, s.name),
                           suite_fingerprint=compare.suite_fingerprint(root)), lease)
    except LeaseLost as e:
        result.add(key, Outcome.LOST, str(e))
        log.warning("nightly: %s: %s", key, bounded(e, 300))
        return
    count(result, out)
    result.add(key, Outcome.EVALUATED, resumed=bool(out.attempt.get("requests_committed_earlier", 0) or resume),
               profile=note_profile(key, root))


def note_profile(key: CheckpointKey, root: str) -> dict | None:
    """The checkpoint's run profile in short (from the run.json its run wrote tonight), said on the console."""
    uri = storage.join(root, "run.json")
    try:
        summary = tn.profile_summary(json.loads(storage.read_text(uri)).get("profile")) if storage.exists(uri) else None
    except (OSError, ValueError):
        summary = None
    if summary:
        log.info("%s", tn.profile_line(str(key), summary))
    return summary


def count(result: NightResult, out: object) -> None:
    """Add a run's work to the night's counts (requests sent, committed earlier, errored)."""
    if out is None:
        return
    attempt, counts = getattr(out, "attempt", {}) or {}, getattr(out, "counts", {}) or {}
    result.requests_sent += int(attempt.get("requests_sent", 0))
    result.requests_committed_earlier += int(attempt.get("requests_committed_earlier", 0))
    result.requests_errored += int(counts.get("requests_errored", 0))


def fail(ledger: Ledger, rec: LedgerRecord, lease: Lease, reason: str, result: NightResult,
         key: CheckpointKey, profile: dict | None = None) -> None:
    ledger.put(rec.but(status=Status.FAILED, reason=bounded(reason, 1000), finished=iso(now())), lease)
    result.add(key, Outcome.FAILED, bounded(reason, 300), profile=profile)
    log.warning("nightly: %s failed: %s", key, bounded(reason, 300))


def identity(root: str, model: str) -> dict | None:
    """The checkpoint identity the run recorded (``model_info`` of its responses: uri + sha256 / revision)."""
    meta = json.loads(storage.read_text(storage.join(root, "run.json")))
    info = meta.get("models", {}).get(model)
    info = json.loads(info) if isinstance(info, str) else info
    ck = (info or {}).get("checkpoint")
    return ck if isinstance(ck, dict) else {"checkpoint": ck}


def start_cluster(cfg: NightlyConfig, attempts: int = 3) -> None:
    """Ray for the night's runs (as ``evalcore run`` starts it), tried ``attempts`` times: a local node can time
    out starting on a loaded machine."""
    import ray  # heavy: ray (seconds to import; `evalcore --help` imports this module)

    for i in range(attempts):
        if ray.is_initialized():
            return
        try:
            init_ray(cfg.ray)
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
    ledger.put(LedgerRecord(s.name, SERIES_ROW, Status.WAITING, uri=s.prefix, reason=problem))


@storage.scoped(lambda cfg, *_, **__: cfg.storage.settings())  # the nightly's S3 options and read deadline
def night(cfg: NightlyConfig, owner: str | None = None) -> NightResult:
    """Run one night over every series of ``cfg``; returns what it did (the files are under ``cfg.root``)."""
    owner = owner or new_owner()
    leases = Leases.open(cfg.root, cfg.lease_settle_seconds)
    ledger = Ledger(cfg.root, leases)
    result = NightResult(root=cfg.root, store=leases.fallback)
    for s in cfg.series:
        try:
            cps = discovery.discover(s)
        except discovery.SeriesUnreadable as e:
            cps, problem = [], str(e)
        else:
            problem = None if cps else f"series {s.name}: no checkpoints under {s.prefix}"
        series_record(ledger, s, problem, result)
        for cp in pick(cfg, ledger, cps, result):
            start_cluster(cfg)  # a cluster that will not start fails the night, not a checkpoint
            lease = ledger.claim(s.name, cp.name, owner, cfg.lease_seconds)
            if lease is None:
                result.add(cp.key, Outcome.LEASED)
                log.info("nightly: %s/%s is leased by another nightly; skipped", s.name, cp.name)
                continue
            try:
                evaluate(cfg, s, cp, ledger, lease, result)
            finally:
                ledger.release(lease)
            if result.lost:  # this nightly stalled past a lease: another holds the night now
                log.warning("nightly: stopped: %s was taken over by another nightly; this one writes nothing shared "
                            "(comparisons, dashboard, nightly.json, webhook)", ", ".join(map(str, result.lost)))
                return result
    summarize(cfg, ledger, result)
    for key in result.evaluated:  # tonight's checkpoints, each logged once at its training step (nightly/tracked.py)
        tracked.log_checkpoint(cfg, key, result.regressions, tracked.verdict_of(result.tonight, key),
                               run_root(cfg.root, key.series, key.checkpoint))
    return result


def summarize(cfg: NightlyConfig, ledger: Ledger, result: NightResult) -> None:
    """Comparisons and history from every finished checkpoint (kept from the last night when nothing changed);
    then, every night, tonight's verdicts, the dashboard, nightly.json and the webhook."""
    t = time.perf_counter()
    records = ledger.records()
    out = cfg.root
    key = compare.digest([TABLES_VERSION, cfg.model_dump(mode="json"), result.notes,
                          [{k: v for k, v in r.as_json().items() if k not in ("updated", "owner", "lease_token")}
                           for r in sorted(records, key=lambda r: r.key)]])
    key_uri = storage.join(out, "dashboard.key")
    if storage.exists(key_uri) and storage.read_text(key_uri) == key:  # nothing changed since the last night
        regressions = storage.read_parquet(storage.join(out, "regressions.parquet")).to_pandas()
        hist = storage.read_parquet(storage.join(out, "history.parquet")).to_pandas()
        notes: list[str] = []
        log.info("nightly: no change since the last night; comparisons kept")
    else:
        regressions, notes = history.regressions(cfg, records)
        hist = history.history(cfg, records)
        storage.write_parquet(pa.Table.from_pandas(regressions[REGRESSION_COLUMNS], preserve_index=False),
                              storage.join(out, "regressions.parquet"))
        storage.write_parquet(pa.Table.from_pandas(hist, preserve_index=False), storage.join(out, "history.parquet"))
        storage.write_parquet(ledger.table(), storage.join(out, "ledger.parquet"))
        storage.write_text(key_uri, key)
    result.regressions = regressions
    result.notes += notes
    result.tonight = tonight_of(cfg, result, hist)
    render(cfg, result, hist, records)
    tn.write(result.tonight)
    if cfg.notify is not None:
        tn.notify(cfg.notify.url_env, result.tonight, cfg.notify.timeout_s)
    log.info("nightly: compared and rendered in %.1f s", time.perf_counter() - t)


def verdict(cfg: NightlyConfig, seen: Seen, regressions: pd.DataFrame, hist: pd.DataFrame) -> CheckpointVerdict:
    """Tonight's verdict of one checkpoint: an evaluated one's from its comparisons, the others' their outcome."""
    key = seen.key
    if seen.outcome is not Outcome.EVALUATED:
        return CheckpointVerdict(key.series, key.checkpoint, Verdict.of(seen.outcome), reason=seen.reason,
                                 profile=seen.profile)
    decided, flagged, improved = tn.checkpoint_verdict(key, regressions)
    return CheckpointVerdict(key.series, key.checkpoint, decided, tn.listening(hist, key, cfg.stats.min_items),
                             flagged, improved, seen.resumed, reason=tn.why(key, regressions),
                             run_root=run_root(cfg.root, key.series, key.checkpoint), profile=seen.profile)


#: the order of tonight's checkpoints in nightly.json, the console and the dashboard
SHOWN = (Outcome.EVALUATED, Outcome.FAILED, Outcome.LOST, Outcome.LEASED, Outcome.WAITING)


def tonight_of(cfg: NightlyConfig, result: NightResult, hist: pd.DataFrame) -> Tonight:
    """Each checkpoint seen tonight with its verdict, the counts and the exit code."""
    seen = sorted(result.seen, key=lambda s: SHOWN.index(s.outcome))
    verdicts = [verdict(cfg, s, result.regressions, hist) for s in seen]
    counts = Counts.of(result.seen, requests_sent=result.requests_sent,
                       requests_committed_earlier=result.requests_committed_earlier,
                       requests_errored=result.requests_errored)
    code = tn.REGRESSION_EXIT if cfg.fail_on_regression and len(result.flagged_tonight) else 0
    return Tonight(cfg.name, iso(result.started) or "", cfg.root, verdicts, counts, result.store, code)


def render(cfg: NightlyConfig, result: NightResult, hist: pd.DataFrame, records: list[LedgerRecord]) -> None:
    """dashboard.html and dashboard.md: the morning page."""
    board = leaderboard.leaderboard(cfg, records)
    tonight = {str(k) for k in result.evaluated}
    links = evidence.links(cfg.root, result.regressions, tonight, run_root)  # the flagged rows' changed items
    html, md = dashboard.render(result.tonight, result.regressions, hist, records, result.notes, board, links)
    storage.write_text(storage.join(cfg.root, "dashboard.html"), html)
    storage.write_text(storage.join(cfg.root, "dashboard.md"), md)
