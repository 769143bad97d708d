"""The nightly's checkpoint outcomes as types: a ledger record (:class:`LedgerRecord`, its :class:`Status`), what
tonight did with a checkpoint (:class:`Seen`, its :class:`Outcome`), tonight's verdict of it
(:class:`CheckpointVerdict`, its :class:`Verdict`) and the night (:class:`Tonight`, its :class:`Counts`), each
checkpoint named by a :class:`CheckpointKey`.

The ledger (:mod:`evalcore.nightly.ledger`), the night (:mod:`evalcore.nightly.night`,
:mod:`~evalcore.nightly.tonight`), the trackers (:mod:`evalcore.nightly.tracked`, ``evalcore track``) and the
dashboard (:mod:`evalcore.reports.dashboard`) pass these to each other, never dicts or ``"series/checkpoint"``
strings. The module sits outside ``nightly/`` so that the dashboard (``reports``) and the trackers (``tracking``),
below the nightly, read them too; it imports nothing of evalcore but :mod:`evalcore.core.storage` (the paths of
``nightly.json``).

On disk: statuses and verdicts are ``str`` enums, so a ledger record and ``nightly.json`` hold the same strings as
before they were types (``"status": "finished"``). :meth:`LedgerRecord.from_json` reads a record written by any
evalcore since ledger version 1 (an absent key is its default; a key it does not know is kept as read and written
back), :meth:`Tonight.from_json` reads a ``nightly.json`` (``tests/fixtures/nightly_v1`` holds both as the nightly
wrote them before).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from evalcore.core import storage


class Status(StrEnum):
    """A ledger record's status."""

    RUNNING = "running"  # claimed and evaluating (or interrupted: the next night resumes it)
    FINISHED = "finished"
    FAILED = "failed"  # with its reason; tried again until ``max_attempts``
    WAITING = "waiting"  # not ready (no ready marker, unreadable), or a series whose prefix lists nothing


class Outcome(StrEnum):
    """What tonight did with a checkpoint it saw."""

    EVALUATED = "evaluated"  # finished tonight, new or resumed
    FAILED = "failed"
    LOST = "lost"  # another nightly took its lease over mid-evaluation
    LEASED = "leased"  # another nightly holds it
    WAITING = "waiting"  # not ready


class Verdict(StrEnum):
    """Tonight's verdict of a checkpoint: an evaluated one's from its comparisons, the others' their outcome."""

    REGRESSED = "regressed"  # a flagged comparison against its previous checkpoint or the baseline
    IMPROVED = "improved"  # a significant gain of at least the metric's minimum effect, nothing flagged
    UNCHANGED = "unchanged"
    FAILED = "failed"
    WAITING = "waiting"
    LEASED = "leased"
    LOST = "lost"

    @classmethod
    def of(cls, outcome: Outcome) -> Verdict:
        """The verdict of a checkpoint tonight did not evaluate (an evaluated one's comes from its comparisons)."""
        if outcome is Outcome.EVALUATED:
            raise ValueError("an evaluated checkpoint's verdict comes from its comparisons")
        return cls(outcome.value)


@dataclass(frozen=True, order=True)
class CheckpointKey:
    """A checkpoint of a series; ``str()`` is ``<series>/<checkpoint>`` (for people and logs only)."""

    series: str
    checkpoint: str

    def __str__(self) -> str:
        return f"{self.series}/{self.checkpoint}"


def _pick(cls: type, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fields of ``cls`` in ``data``, the other keys)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}, {k: v for k, v in data.items() if k not in names}


@dataclass(frozen=True)
class LedgerRecord:
    """One checkpoint's record in the ledger (``<root>/ledger/<series>/<checkpoint>.json``)."""

    series: str
    checkpoint: str
    status: Status
    uri: str | None = None
    reason: str | None = None  # why it failed or waits
    attempts: int = 0
    run_root: str | None = None
    identity: dict[str, Any] | None = None  # the checkpoint identity the run recorded (uri + sha256 / revision)
    suite_fingerprint: str | None = None
    started: str | None = None
    finished: str | None = None
    last_failure: str | None = None  # the reason of the attempt before, while it is tried again
    owner: str | None = None  # the nightly that holds (or held) its lease
    lease_token: str | None = None  # the lease it was written under
    updated: str | None = None  # stamped by the ledger on every write
    #: keys of the record this evalcore does not know (written by another version), kept as read
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @property
    def key(self) -> CheckpointKey:
        return CheckpointKey(self.series, self.checkpoint)

    def but(self, **changes: Any) -> LedgerRecord:
        """This record with ``changes`` (field names)."""
        return replace(self, **changes)

    def as_json(self) -> dict[str, Any]:
        """The record as the ledger writes it (every field; the status as its string)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        out["status"] = self.status.value
        return {**self.extra, **out}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LedgerRecord:
        """A record as read from the ledger (``version`` is the ledger's; raises ``ValueError`` on an unknown status
        or a record without series, checkpoint or status)."""
        known, extra = _pick(cls, {k: v for k, v in data.items() if k != "version"})
        missing = [k for k in ("series", "checkpoint", "status") if known.get(k) is None]
        if missing:
            raise ValueError(f"no {', '.join(missing)}")
        if known.get("attempts") is None:
            known.pop("attempts", None)
        return cls(**known, extra=extra)


@dataclass(frozen=True)
class Seen:
    """What tonight did with one checkpoint: its outcome, whether an earlier attempt had started it (``resumed``,
    evaluated ones), and why (failed, waiting, lost)."""

    key: CheckpointKey
    outcome: Outcome
    resumed: bool = False
    reason: str | None = None
    profile: dict[str, Any] | None = None  # its run's profile in short (nightly.tonight.profile_summary)


@dataclass
class CheckpointVerdict:
    """One checkpoint seen tonight, as ``nightly.json``, the console, the webhook and the dashboard show it."""

    series: str
    checkpoint: str
    verdict: Verdict
    listening: str | None = None  # yes | no | unclear (finished checkpoints)
    flagged: int = 0  # distinct drops flagged, each once whatever it was flagged against
    improved: int = 0  # distinct significant gains, likewise
    resumed: bool = False
    reason: str | None = None  # why: a failure's reason; a regressed or improved checkpoint's changes
    run_root: str | None = None
    profile: dict[str, Any] | None = None  # the run's profile in short, where its run.json has one

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)

    @property
    def key(self) -> CheckpointKey:
        return CheckpointKey(self.series, self.checkpoint)


@dataclass
class Counts:
    """The night's work: checkpoints by outcome, requests by where their answer came from."""

    evaluated: int = 0  # finished tonight, new or resumed
    resumed: int = 0
    failed: int = 0
    waiting: int = 0
    leased_elsewhere: int = 0
    lost: int = 0
    requests_sent: int = 0  # to models, tonight
    requests_committed_earlier: int = 0  # by an interrupted attempt (resumed, not sent again)
    requests_errored: int = 0  # error rows among the runs finished tonight

    @classmethod
    def of(cls, seen: list[Seen], **requests: int) -> Counts:
        """The counts of the checkpoints ``seen`` tonight, with the night's ``requests_*`` counts."""
        n = {o: sum(s.outcome is o for s in seen) for o in Outcome}
        return cls(evaluated=n[Outcome.EVALUATED], resumed=sum(s.outcome is Outcome.EVALUATED and s.resumed
                                                               for s in seen),
                   failed=n[Outcome.FAILED], waiting=n[Outcome.WAITING], leased_elsewhere=n[Outcome.LEASED],
                   lost=n[Outcome.LOST], **requests)

    def line(self) -> str:
        return (f"tonight: {self.evaluated} checkpoint(s) evaluated ({self.resumed} resumed), {self.failed} failed, "
                f"{self.waiting} waiting, {self.leased_elsewhere} leased elsewhere; {self.requests_sent} request(s) "
                f"sent to models, {self.requests_committed_earlier} committed earlier, {self.requests_errored} "
                "errored")


#: the files ``nightly.json`` points to, under the nightly's root
PATHS = (("dashboard_html", "dashboard.html"), ("dashboard_md", "dashboard.md"),
         ("regressions", "regressions.parquet"), ("history", "history.parquet"), ("ledger", "ledger.parquet"))


@dataclass
class Tonight:
    """The night in one object: what ``nightly.json``, the console and the dashboard's first block show."""

    name: str
    date: str
    root: str
    checkpoints: list[CheckpointVerdict] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    store: str | None = None  # why leases are not atomic on this store (None: conditional writes)
    exit_code: int = 0

    def as_json(self) -> dict[str, Any]:
        """``nightly.json``'s content."""
        out = asdict(self)
        for c in out["checkpoints"]:
            c["verdict"] = Verdict(c["verdict"]).value
            if c["profile"] is None:  # a checkpoint whose run has no profile (not run, or before profiles) has no key
                del c["profile"]
        out["store"] = {"conditional_writes": self.store is None, "fallback": self.store}
        out["paths"] = {k: storage.join(self.root, v) for k, v in PATHS}
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tonight:
        """A night as read from ``nightly.json`` (``paths`` follow from the root)."""
        checkpoints = [CheckpointVerdict(**_pick(CheckpointVerdict, c)[0]) for c in data.get("checkpoints") or []]
        counts = Counts(**_pick(Counts, data.get("counts") or {})[0])
        store = data.get("store") or {}
        return cls(data["name"], data["date"], data["root"], checkpoints, counts,
                   None if store.get("conditional_writes", True) else store.get("fallback"),
                   int(data.get("exit_code", 0)))
