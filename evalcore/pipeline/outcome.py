"""Whether a finished run's numbers are usable: nothing scored, the error budget, protocols left empty.

The checks run after the tables and the report are written (:func:`evalcore.pipeline.finish.finish`); a
failed one raises :class:`RunUnscored`, which the CLI turns into exit code 4 with the message (the top
reasons of the errors: ``stage/tag × count`` and the text of one such error, so ``model/ValueError ×12`` says
which ValueError).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable

from evalcore.runconfig.config import RunConfig
from evalcore.core.errors import bounded
from evalcore.protocols.requests import reads


@dataclass
class RunResult:
    root: str
    counts: dict[str, Any]
    report: str
    #: one line per model: does it listen? (evalcore.reports.verdict)
    verdicts: list[str] = field(default_factory=list)
    #: this attempt's work: requests_sent (to models), requests_rejudged, requests_committed_earlier (resumed)
    attempt: dict[str, int] = field(default_factory=dict)
    #: seconds the run waited for its trackers after its report (None: no tracking block)
    tracking_wait_s: float | None = None


class RunUnscored(RuntimeError):
    """The run finished but its numbers are not usable (nothing scored, or the error budget exceeded).
    Raised after the tables and report are written (``.result`` holds the run's counts and report); the
    CLI exits with :attr:`evalcore.core.errors.ExitCode.UNSCORED` and the message."""

    result: RunResult


class ErrorBudgetExceeded(RunUnscored):
    """The run broke the error budget's rule (:data:`BUDGET_SCOPES`, :data:`BUDGET_NO_ITEMS`). ``model``: the model
    whose requests exceeded it; ``benchmark``: the (protocol instance, dataset) whose requests did."""

    model: str | None = None
    benchmark: tuple[str, str] | None = None

    def __init__(self, rate: float, limit: float, reasons: list[tuple[str, int]], result: RunResult,
                 what: str = "requests", problems: list[str] | None = None,
                 examples: dict[str, str] | None = None, model: str | None = None,
                 benchmark: dict[str, Any] | None = None) -> None:
        top = top_text(reasons, examples)
        c = result.counts
        self.benchmark = None if benchmark is None else (benchmark["protocol"], benchmark["dataset"])
        if problems:
            msg = f"error budget exceeded: {'; '.join(problems)}"
        elif benchmark is not None:
            b = benchmark
            dead = " (every one of its requests: it has no score)" if b["requests_errored"] == b["requests_in"] else ""
            msg = (f"error budget exceeded: benchmark {b['protocol']} · {b['dataset']} errored on "
                   f"{b['requests_errored']} of {b['requests_in']} of its requests{dead} ({rate:.1%}) > max_error_rate "
                   f"{limit:.1%}; top reasons: {top}")
        elif model is not None:
            m = c["models"][model]
            dead = " (every one of its requests)" if m["requests_errored"] == m["requests_in"] else ""
            msg = (f"error budget exceeded: model {model!r} errored on {m['requests_errored']} of {m['requests_in']} "
                   f"of its requests{dead} ({rate:.1%}) > max_error_rate {limit:.1%}; top reasons: {top}")
        else:
            msg = (f"error budget exceeded: {c[f'{what}_errored']} of {c[f'{what}_in']} {what} errored "
                   f"({rate:.1%}) > max_error_rate {limit:.1%}; top reasons: {top}")
        super().__init__(f"{msg}. Tables and report are in {result.root}")
        self.rate, self.limit, self.reasons, self.result, self.model = rate, limit, reasons, result, model


class NothingScored(RunUnscored):
    """Not one request could be scored (every item invalid, or every request errored)."""

    def __init__(self, result: RunResult, reasons: list[tuple[str, int]],
                 examples: dict[str, str] | None = None) -> None:
        c = result.counts
        top = top_text(reasons, examples)
        what = (f"no valid item: {c['items_errored']} of {c['items_in']} item rows rejected" if not c["items_valid"]
                else f"{c['requests_errored']} of {c['requests_in']} requests errored")
        super().__init__(f"nothing could be scored ({what}); top reasons: {top}. "
                         f"Tables and report are in {result.root}")
        self.result, self.reasons = result, reasons


def error_reason(row: dict) -> str:
    """``stage/tag`` of an error row, e.g. ``decode/missing`` (the tag is the error's text up to ':'; an item
    row's reason up to its first 60 characters)."""
    text = (row.get("error") or "").strip()
    tag = text.split(":", 1)[0].strip() if ":" in text[:40] else text[:60]
    return f"{row.get('error_stage') or '?'}/{tag or '?'}"


#: the most characters of an error's text shown next to its reason in a run's summary
EXAMPLE_CHARS = 120


def _top(rows: list[dict], top: int = 3) -> list[tuple[str, int]]:
    return Counter(error_reason(r) for r in rows if r.get("error") is not None).most_common(top)


def examples(rows: list[dict], reasons: list[tuple[str, int]]) -> dict[str, str]:
    """reason → the (bounded) text of its first error row, for the reasons whose tag is not already the text."""
    want, out = {r for r, _ in reasons}, {}
    for row in rows:
        if row.get("error") is not None and (reason := error_reason(row)) in want and reason not in out:
            text = bounded(row["error"], EXAMPLE_CHARS)
            out[reason] = "" if reason.endswith("/" + text) else text
    return {r: t for r, t in out.items() if t}


def top_text(reasons: list[tuple[str, int]], texts: dict[str, str] | None = None) -> str:
    """``model/ValueError ×3 ("ValueError: input has 2 channels"), decode/missing ×1 (…)``, or ``none``."""
    texts = texts or {}
    return ", ".join(f"{r} ×{n}" + (f" ({texts[r]!r})" if texts.get(r) else "") for r, n in reasons) or "none"


def model_shares(counts: dict[str, Any]) -> list[tuple[str, int, int, float]]:
    """(model, requests in, errored, errored share) of every model of a run's counts, the worst share first."""
    rows = [(m, int(v["requests_in"]), int(v["requests_errored"]), float(v["error_share"]))
            for m, v in (counts.get("models") or {}).items()]
    return sorted(rows, key=lambda r: (-r[3], r[0]))


#: The error budget's rule (``max_error_rate``), written once: a run fails (exit 4, after its tables and report are
#: written) when the errored share of any of these is above the budget — :func:`check_error_budget` applies them in
#: this order, of the models and the benchmarks (a protocol instance on one dataset:
#: :mod:`evalcore.pipeline.benchmarks`) the worst first, and names the first one above; ``evalcore validate`` says
#: them (:func:`budget_rule`). One with every request errored is above any budget below 1.
BUDGET_SCOPES: dict[str, str] = {"items": "the item rows", "model": "any model's requests",
                                 "benchmark": "any benchmark's requests", "requests": "all requests"}
#: and, with a budget, this fails the run too (its figures would leave a configured protocol out)
BUDGET_NO_ITEMS = "a configured protocol has no valid item"


def budget_rule(limit: float) -> str:
    """The rule in words: ``exit 4 when more than 50.0% of the item rows, of … error, or when …``."""
    *first, last = BUDGET_SCOPES.values()
    return f"exit 4 when more than {limit:.1%} of {', of '.join(first)} or of {last} error, or when {BUDGET_NO_ITEMS}"


def _over(scope: str, result: RunResult, rows: list[dict], limit: float, top: int, item_errors: list[dict],
          benchmarks: list[dict[str, Any]]) -> ErrorBudgetExceeded | None:
    """The error naming where ``scope``'s errored share is above ``limit`` (the worst first), else None."""
    c = result.counts
    if scope == "items":
        if c.get("items_in") and c["items_errored"] / c["items_in"] > limit:
            reasons = _top(item_errors, top)
            return ErrorBudgetExceeded(c["items_errored"] / c["items_in"], limit, reasons, result, what="items",
                                       examples=examples(item_errors, reasons))
    elif scope == "model":
        for model, n, errored, share in model_shares(c):
            if n and errored / n > limit:
                mine = [r for r in rows if str(r.get("model")) == model]
                reasons = _top(mine, top)
                return ErrorBudgetExceeded(errored / n, limit, reasons, result, examples=examples(mine, reasons),
                                           model=model)
    elif scope == "benchmark":
        shares = [(b["requests_errored"] / b["requests_in"], b) for b in benchmarks if b.get("requests_in")]
        for share, b in sorted(shares, key=lambda sb: (-sb[0], sb[1]["protocol"], sb[1]["dataset"])):
            if share > limit:
                mine = [r for r in rows if (str(r.get("protocol")), str(r.get("dataset"))) == (b["protocol"],
                                                                                            b["dataset"])]
                reasons = _top(mine, top)
                return ErrorBudgetExceeded(share, limit, reasons, result, examples=examples(mine, reasons),
                                           benchmark=b)
    elif scope == "requests":
        if c["requests_in"] and c["requests_errored"] / c["requests_in"] > limit:
            reasons = _top(rows, top)
            return ErrorBudgetExceeded(c["requests_errored"] / c["requests_in"], limit, reasons, result,
                                       examples=examples(rows, reasons))
    else:
        raise ValueError(f"unknown error-budget scope {scope!r}")
    return None


def check_error_budget(result: RunResult, rows: list[dict], limit: float | None, top: int = 3,
                       item_errors: list[dict] | None = None, benchmarks: list[dict[str, Any]] | None = None) -> None:
    """Raise :class:`ErrorBudgetExceeded` where the error budget's rule (:data:`BUDGET_SCOPES`,
    :data:`BUDGET_NO_ITEMS`) fails the run with ``limit``; nothing without a limit."""
    if limit is None:
        return
    for scope in BUDGET_SCOPES:
        if (over := _over(scope, result, rows, limit, top, item_errors or [], benchmarks or [])) is not None:
            raise over
    if result.counts.get("protocols_without_items"):
        raise ErrorBudgetExceeded(0.0, limit, [], result, problems=list(result.counts["protocols_without_items"]))


def check_scored(result: RunResult, rows: list[dict], item_errors: list[dict], top: int = 3) -> None:
    """Raise :class:`NothingScored` when no request was scored, naming the top reasons (items' when no
    item was valid)."""
    c = result.counts
    if c["requests_scored"] == 0:
        which = item_errors if not c["items_valid"] or not rows else rows
        reasons = _top(which, top)
        raise NothingScored(result, reasons, examples(which, reasons))


def protocols_without_items(cfg: RunConfig, items: Iterable[dict]) -> list[str]:
    """One line per configured protocol that no valid item reaches (its items all rejected, or none given), by the
    rule that expands requests (:func:`evalcore.protocols.requests.reads`: an item's ``protocol`` is a kind)."""
    out = []
    for p in cfg.protocols:
        if not any(reads(p, i) for i in items):
            where = f" in dataset(s) {', '.join(sorted(p.datasets))}" if p.datasets else ""
            out.append(f"protocol {p.name!r} is configured but has no valid item{where}")
    return out
