"""What tonight did, for people and for tools: each checkpoint's verdict, the night's honest counts, the exit
code, ``<root>/nightly.json`` and the optional webhook.

A checkpoint's verdict: ``regressed`` (a flagged comparison against its previous checkpoint or the
baseline), ``improved`` (a significant gain of at least the metric's minimum effect, nothing flagged),
``unchanged``, ``failed`` (with its reason), ``waiting`` (not ready), ``leased`` (another nightly holds
it) or ``lost`` (another nightly took its lease over mid-evaluation). Its listening verdict is the run
report's (:mod:`evalcore.reports.verdict`). Only checkpoints evaluated tonight decide the exit code:
history stays on the dashboard.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field

import pandas as pd

from evalcore import storage
from evalcore.deadline import call_within
from evalcore.errors import bounded
from evalcore.reports.verdict import verdicts

log = logging.getLogger("evalcore")
REGRESSION_EXIT = 3
#: one drop (or gain) of a checkpoint: compared with the previous checkpoint and with the baseline, it is two
#: comparison rows but one change
CHANGE_KEY = ["protocol", "dataset", "condition", "variant", "metric", "group"]


@dataclass
class CheckpointVerdict:
    series: str
    checkpoint: str
    verdict: str  # regressed | improved | unchanged | failed | waiting | leased | lost
    listening: str | None = None  # yes | no | unclear (finished checkpoints)
    flagged: int = 0  # distinct drops flagged, each once whatever it was flagged against (CHANGE_KEY)
    improved: int = 0  # distinct significant gains, likewise
    resumed: bool = False
    reason: str | None = None  # why: a failure's reason; a regressed or improved checkpoint's changes (why())
    run_root: str | None = None


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

    def line(self) -> str:
        return (f"tonight: {self.evaluated} checkpoint(s) evaluated ({self.resumed} resumed), {self.failed} failed, "
                f"{self.waiting} waiting, {self.leased_elsewhere} leased elsewhere; {self.requests_sent} request(s) "
                f"sent to models, {self.requests_committed_earlier} committed earlier, {self.requests_errored} "
                "errored")


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

    def as_json(self) -> dict:
        out = asdict(self)
        out["store"] = {"conditional_writes": self.store is None, "fallback": self.store}
        out["paths"] = {k: storage.join(self.root, v) for k, v in (
            ("dashboard_html", "dashboard.html"), ("dashboard_md", "dashboard.md"),
            ("regressions", "regressions.parquet"), ("history", "history.parquet"), ("ledger", "ledger.parquet"))}
        return out


def flagged_tonight(regressions: pd.DataFrame, evaluated: list[str]) -> pd.DataFrame:
    """The flagged comparisons of the checkpoints evaluated tonight (``series/checkpoint`` keys)."""
    if not len(regressions):
        return regressions
    keys = regressions["series"].astype(str) + "/" + regressions["checkpoint"].astype(str)
    return regressions[regressions["flagged"].astype(bool) & keys.isin(set(evaluated))]


def listening(hist: pd.DataFrame, series: str, checkpoint: str, min_items: int) -> str | None:
    """The run report's listening verdict of one finished checkpoint, from its summary rows."""
    rows = hist[(hist["series"] == series) & (hist["checkpoint"] == checkpoint)] if len(hist) else hist
    found = verdicts(rows, min_items) if len(rows) else []
    return found[0].listens if found else None


def changes(rows: pd.DataFrame) -> int:
    """How many distinct changes ``rows`` (comparison rows) hold: a drop flagged against the previous checkpoint and
    against the baseline is one drop."""
    return len(rows.drop_duplicates(CHANGE_KEY)) if len(rows) else 0


def checkpoint_verdict(series: str, checkpoint: str, regressions: pd.DataFrame) -> tuple[str, int, int]:
    """(verdict, flagged drops, significant gains) of a finished checkpoint from its comparison rows, each change
    counted once (:func:`changes`)."""
    if not len(regressions):
        return "unchanged", 0, 0
    mine = regressions[(regressions["series"] == series) & (regressions["checkpoint"] == checkpoint)]
    flagged = changes(mine[mine["flagged"].astype(bool)])
    improved = changes(mine[mine["improved"].astype(bool)]) if "improved" in mine.columns else 0
    return ("regressed" if flagged else "improved" if improved else "unchanged"), flagged, improved


def _against(rows: pd.DataFrame) -> str:
    """``24 vs the previous checkpoint step-2000, 24 vs the baseline step-1000``: each reference and its count."""
    out = []
    for (ref, role), g in rows.groupby(["reference", "reference_role"], sort=False):
        who = {"previous": "the previous checkpoint", "baseline": "the baseline",
               "previous+baseline": "the previous checkpoint (the baseline)"}.get(str(role), str(role))
        out.append(f"{changes(g)} vs {who} {ref}")
    return ", ".join(out)


def why(series: str, checkpoint: str, regressions: pd.DataFrame) -> str | None:
    """Why a finished checkpoint is ``regressed`` or ``improved``: its changes counted once, against what, and the
    largest (``28 drop(s) flagged (28 vs the previous checkpoint step-2000, 28 vs the baseline step-1000); largest:
    mcq · synth accuracy (task=instrument_mcq) correct −0.650 [−0.72, −0.58] vs step-1000``); None when unchanged."""
    if not len(regressions):
        return None
    mine = regressions[(regressions["series"] == series) & (regressions["checkpoint"] == checkpoint)]
    for column, what in (("flagged", "drop(s) flagged"), ("improved", "significant gain(s)")):
        if column not in mine.columns:
            continue
        hit = mine[mine[column].astype(bool)]
        if len(hit):
            r = hit.loc[hit["delta"].abs().idxmax()]
            group = "" if r["group"] == "all" else f" ({r['group']})"
            largest = (f"{r['protocol']} · {r['dataset']} {r['metric']}{group} {r['condition']} {r['delta']:+.3f} "
                       f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}] vs {r['reference']}")
            return bounded(f"{changes(hit)} {what} ({_against(hit)}); largest: {largest}", 300)
    return None


def write(tonight: Tonight) -> None:
    """``<root>/nightly.json``: tonight's verdicts, counts, paths and exit code (rewritten every night)."""
    storage.write_text(storage.join(tonight.root, "nightly.json"), json.dumps(tonight.as_json(), indent=2))


#: the most characters of a failing webhook's reason in the warning (the server's own text is never echoed whole)
WHY_CHARS = 120


def message(tonight: Tonight) -> str:
    """The webhook's text: one line per checkpoint seen tonight, then where the dashboard is."""
    lines = [f"evalcore nightly {tonight.name} ({tonight.date}): exit {tonight.exit_code}"]
    for c in tonight.checkpoints:
        extra = f", listens {c.listening}" if c.listening else ""
        extra += f", {c.flagged} flagged" if c.flagged else ""
        extra += f": {bounded(c.reason, 160)}" if c.reason and c.verdict in ("failed", "waiting", "lost") else ""
        lines.append(f"• {c.series}/{c.checkpoint}: {c.verdict}{extra}")
    if not tonight.checkpoints:
        lines.append("• nothing new tonight")
    lines.append(f"dashboard: {storage.join(tonight.root, 'dashboard.html')}")
    return "\n".join(lines)


def notify(url_env: str, tonight: Tonight, timeout_s: float) -> bool:
    """POST a Slack-compatible ``{"text": …}`` body to the URL in ``$url_env``. Never raises and never logs the
    URL (a webhook URL is a secret): a failure of any kind (an HTTP status, no connection, an answer that is not
    HTTP, no complete answer within ``timeout_s`` — a deadline for the whole call, not for each read) is one
    warning naming the variable, the error's class and a bounded reason."""
    url = os.environ.get(url_env)
    if not url:
        log.warning("nightly: notify.url_env %s is not set; no notification sent", url_env)
        return False
    body = json.dumps({"text": message(tonight)}).encode()

    def post() -> None:
        req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - the user's configured URL
            resp.read(1 << 16)

    try:
        call_within(timeout_s, post)
        return True
    except urllib.error.HTTPError as e:
        why = f"HTTP {e.code}"
    except Exception as e:  # noqa: BLE001 - a webhook never fails the night, whatever it answers
        reason = getattr(e, "reason", e) if isinstance(e, urllib.error.URLError) else e
        errno = getattr(reason, "errno", None)
        text = bounded(str(reason).replace(url, "***"), WHY_CHARS) if not errno else ""
        why = type(reason).__name__ + (f" (errno {errno})" if errno else "") + (f": {text}" if text else "")
    log.warning("nightly: the webhook in $%s failed (%s); the night's result stands", url_env, why)
    return False
