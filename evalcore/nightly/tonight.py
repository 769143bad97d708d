"""What tonight did, for people and for tools: each checkpoint's verdict, the night's honest counts, the exit
code, ``<root>/nightly.json`` and the optional webhook.

The night is a :class:`~evalcore.core.nightly_outcome.Tonight` (its types: :mod:`evalcore.core.nightly_outcome`). A
checkpoint's verdict: ``regressed`` (a flagged comparison against its previous checkpoint or the baseline),
``improved`` (a significant gain of at least the metric's minimum effect, nothing flagged), ``unchanged``,
``failed`` (with its reason), ``waiting`` (not ready), ``leased`` (another nightly holds it) or ``lost`` (another
nightly took its lease over mid-evaluation). Its listening verdict is the run
report's (:mod:`evalcore.reports.verdict`). Only checkpoints evaluated tonight decide the exit code:
history stays on the dashboard.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.error
import urllib.request

import pandas as pd

from evalcore.core import storage
from evalcore.core.deadline import call_within
from evalcore.core.errors import bounded
from evalcore.core.nightly_outcome import CheckpointKey, Tonight, Verdict
from evalcore.reports.verdict import verdicts

log = logging.getLogger("evalcore")
REGRESSION_EXIT = 3
#: one drop (or gain) of a checkpoint: compared with the previous checkpoint and with the baseline, it is two
#: comparison rows but one change
CHANGE_KEY = ["protocol", "dataset", "condition", "variant", "metric", "group"]


def of(rows: pd.DataFrame, key: CheckpointKey) -> pd.DataFrame:
    """The rows (with ``series`` and ``checkpoint`` columns) of checkpoint ``key``."""
    return rows[(rows["series"] == key.series) & (rows["checkpoint"] == key.checkpoint)]


def profile_summary(profile: dict | None) -> dict | None:
    """A run's profile (run.json's ``profile``) in short, for ``nightly.json``: its wall, when the first shard was
    committed after the model stage started, each stage's wall and each model's wall, busy fraction and answers/s."""
    if not profile:
        return None
    first = profile.get("first_commit") or {}
    return {"wall_s": profile.get("wall_s"), "first_commit_after_model_start_s": first.get("after_model_start_s"),
            "stages_s": {s["stage"]: s["wall_s"] for s in profile.get("stages") or []},
            "models": {name: {k: m[k] for k in ("wall_s", "busy_fraction", "answers_per_s")}
                       for name, m in (profile.get("models") or {}).items()}}


def profile_line(key: str, summary: dict | None) -> str | None:
    """The console's line for one checkpoint's run, from :func:`profile_summary`."""
    if not summary:
        return None
    first = summary.get("first_commit_after_model_start_s")
    models = "; ".join(f"{name} {m['answers_per_s']:.1f} answers/s, {m['busy_fraction']:.0%} busy"
                       for name, m in summary["models"].items())
    return (f"nightly: {key}: {summary['wall_s']:.0f} s"
            + (f", first shard {first:.0f} s after the model stage started" if first is not None else "")
            + (f"; {models}" if models else ""))


def flagged_tonight(regressions: pd.DataFrame, evaluated: list[CheckpointKey]) -> pd.DataFrame:
    """The flagged comparisons of the checkpoints evaluated tonight."""
    if not len(regressions):
        return regressions
    keys = set(evaluated)
    mine = [CheckpointKey(str(s), str(c)) in keys for s, c in zip(regressions["series"], regressions["checkpoint"])]
    return regressions[regressions["flagged"].astype(bool) & pd.Series(mine, index=regressions.index, dtype=bool)]


def listening(hist: pd.DataFrame, key: CheckpointKey, min_items: int) -> str | None:
    """The run report's listening verdict of one finished checkpoint, from its summary rows."""
    rows = of(hist, key) if len(hist) else hist
    found = verdicts(rows, min_items) if len(rows) else []
    return found[0].listens if found else None


def changes(rows: pd.DataFrame) -> int:
    """How many distinct changes ``rows`` (comparison rows) hold: a drop flagged against the previous checkpoint and
    against the baseline is one drop."""
    return len(rows.drop_duplicates(CHANGE_KEY)) if len(rows) else 0


def checkpoint_verdict(key: CheckpointKey, regressions: pd.DataFrame) -> tuple[Verdict, int, int]:
    """(verdict, flagged drops, significant gains) of a finished checkpoint from its comparison rows, each change
    counted once (:func:`changes`)."""
    if not len(regressions):
        return Verdict.UNCHANGED, 0, 0
    mine = of(regressions, key)
    flagged = changes(mine[mine["flagged"].astype(bool)])
    improved = changes(mine[mine["improved"].astype(bool)]) if "improved" in mine.columns else 0
    return (Verdict.REGRESSED if flagged else Verdict.IMPROVED if improved else Verdict.UNCHANGED), flagged, improved


def _against(rows: pd.DataFrame) -> str:
    """``24 vs the previous checkpoint step-2000, 24 vs the baseline step-1000``: each reference and its count."""
    out = []
    for (ref, role), g in rows.groupby(["reference", "reference_role"], sort=False):
        who = {"previous": "the previous checkpoint", "baseline": "the baseline",
               "previous+baseline": "the previous checkpoint (the baseline)"}.get(str(role), str(role))
        out.append(f"{changes(g)} vs {who} {ref}")
    return ", ".join(out)


def why(key: CheckpointKey, regressions: pd.DataFrame) -> str | None:
    """Why a finished checkpoint is ``regressed`` or ``improved``: its changes counted once, against what, and the
    largest (``28 drop(s) flagged (28 vs the previous checkpoint step-2000, 28 vs the baseline step-1000); largest:
    mcq · synth accuracy (task=instrument_mcq) correct −0.650 [−0.72, −0.58] vs step-1000``); None when unchanged."""
    if not len(regressions):
        return None
    mine = of(regressions, key)
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
        told = c.reason and c.verdict in (Verdict.FAILED, Verdict.WAITING, Verdict.LOST)
        extra += f": {bounded(c.reason, 160)}" if told else ""
        lines.append(f"• {c.key}: {c.verdict}{extra}")
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
