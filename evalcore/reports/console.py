"""What ``evalcore run`` prints: the run's own lines, Ray's known-benign chatter left out, and at the end where the
report is (not its body; ``--verbose`` prints it).

Stages are named on Ray Data's progress bars and logs as ``decode``, ``model:<name>`` and ``judge``. On a terminal
Ray Data draws its progress bars; otherwise (a log file, a CI job, ``ray job logs``) there are no bars and no
periodic status blocks: one ``progress:`` line a minute at most, and one line per stage when the stages end.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections import Counter
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from evalcore.core import ray_internals, storage
from evalcore.reports.run_profile import starved_notes

log = logging.getLogger("evalcore")

PROGRESS_EVERY_S = 60.0
#: Ray Data messages that say nothing about this run (a hint how to turn bars back on)
_RAY_DATA_HINTS = ("Progress bars disabled", "Progress will be logged")
#: Ray Data's high-memory issue advice (a stage's workers use more memory than the stage asks) and its issue count.
#: evalcore asks memory where a stage holds data (decode's audio); a light stage's workers hold their imports, and
#: a held-back stage (evalcore.pipeline.backpressure) runs long enough to be checked. Kept in Ray Data's log file.
_RAY_DATA_MEMORY_ADVICE = re.compile(r"of memory per\s+worker|^Found \d+ issues\. To disable issue detection")

_verbose = False
#: what ``--quiet`` means, on every command that has it
QUIET_HELP = ("Print only results and problems: no progress bars or lines, no INFO lines, no library warnings, no "
              "confirmations (the exit code says it worked).")
#: progress bars of the libraries a command may load (transformers, huggingface_hub, tqdm), off with ``--quiet``;
#: set before they are imported (a local Ray cluster's workers inherit them)
_QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
              "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
_quiet_env: dict[str, str] = {}  # what a quiet setup() set


def setup(verbose: bool = False, quiet: bool = False) -> None:
    """The CLI's logging: evalcore's INFO lines on stderr; with ``verbose``, every library's INFO lines too.
    ``quiet`` keeps only evalcore's warnings and errors: no INFO lines, no library progress bars, and Python's
    warnings (matplotlib's, transformers') go to the ``py.warnings`` log, which prints errors only."""
    global _verbose
    _verbose = verbose and not quiet
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.captureWarnings(quiet)
    logging.getLogger("evalcore").setLevel(logging.WARNING if quiet else logging.NOTSET)
    logging.getLogger("py.warnings").setLevel(logging.ERROR if quiet else logging.NOTSET)
    if quiet:
        _quiet_env.update({k: v for k, v in _QUIET_ENV.items() if k not in os.environ})
        os.environ.update(_quiet_env)
    else:  # a command run in the same process after a quiet one (tests) gets its bars back
        for k in list(_quiet_env):
            if os.environ.get(k) == _quiet_env.pop(k):
                del os.environ[k]
    if not verbose:
        logging.getLogger("absl").setLevel(logging.WARNING)  # rouge-score: "Using default tokenizer." per scorer
        logging.getLogger("botocore").setLevel(logging.WARNING)  # S3 writes: "Found credentials in environment …"
        ray_internals.drop_token_notice()  # a new local cluster's notice, the same on every run


def on_terminal() -> bool:
    """Whether stdout is a terminal (Ray Data's own test for drawing bars rather than logging status blocks)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class _RayDataConsole(logging.Filter):
    """Ray Data's console handler without its INFO lines, its hints about bars and its memory advice (its log file
    keeps all)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        return (record.levelno >= logging.WARNING and not msg.startswith(_RAY_DATA_HINTS)
                and not _RAY_DATA_MEMORY_ADVICE.search(msg))


def quiet_ray_data() -> None:
    """Filter Ray Data's console output (not with ``verbose``); call after ``import ray.data``."""
    if _verbose:
        return
    for handler in logging.getLogger("ray.data").handlers:
        if type(handler).__name__ == "PlainRayHandler" and not any(isinstance(f, _RayDataConsole)
                                                                   for f in handler.filters):
            handler.addFilter(_RayDataConsole())


class StageTally:
    """Counts the judged rows coming back from Ray: per stage, how many rows reached it and how many failed there."""

    def __init__(self) -> None:
        self.rows = 0
        self.requests = 0  # rows of chunk 0: one per request
        self.by_model: Counter[str] = Counter()
        self.errored: Counter[tuple[str, str]] = Counter()  # (stage, model) → rows that failed there
        self.started = time.monotonic()

    def add(self, batch: pa.Table) -> None:
        """Count ``batch``'s rows; a row with a ``rows`` column set (a commit's tally row) counts that many."""
        n = (pc.fill_null(batch.column("rows"), 1) if "rows" in batch.column_names
             else pa.array([1] * batch.num_rows, pa.int64()))
        self.rows += int(pc.sum(n).as_py() or 0)
        first = pc.equal(pc.fill_null(batch.column("chunk_index"), 0), 0)
        self.requests += int(pc.sum(pc.if_else(first, n, 0)).as_py() or 0)
        for model, stage, k in zip(batch.column("model").to_pylist(), batch.column("error_stage").to_pylist(),
                                   n.to_pylist()):
            self.by_model[model] += k
            if stage is not None:
                self.errored[(stage, model)] += k

    def _errored(self, stage: str, model: str | None = None) -> int:
        return sum(n for (s, m), n in self.errored.items() if s == stage and model in (None, m))

    def lines(self) -> list[str]:
        """One line per stage: decode, each model, judge."""
        took = time.monotonic() - self.started
        out = [f"stage decode: {self.requests} requests → {self.rows} rows (one per chunk), "
               f"{self._errored('decode')} errored"]
        for model, n in sorted(self.by_model.items()):
            out.append(f"stage model:{model}: {n} rows, {self._errored('model', model)} errored")
        out.append(f"stage judge: {self.rows} rows, {self._errored('judge')} errored ({took:.0f} s on Ray)")
        return out


def tallied(batches: Iterable[pa.Table], to_run: int, progress: bool = True) -> Iterator[pa.Table]:
    """Pass ``batches`` through, counting them; off a terminal (and with ``progress``) a ``progress:`` line a minute
    at most; at the end one line per stage."""
    tally = StageTally()
    last = time.monotonic()
    for batch in batches:
        tally.add(batch)
        yield batch
        if progress and not on_terminal() and time.monotonic() - last >= PROGRESS_EVERY_S:
            last = time.monotonic()
            log.info("progress: %d of %d requests committed (%.0f s)", tally.requests, to_run,
                     last - tally.started)
    if tally.rows:
        for line in tally.lines():
            log.info("%s", line)


def finished(root: str, report: str, verbose: bool = False, verdicts: Iterable[str] = ()) -> None:
    """The end of ``evalcore run`` on stdout: the reports' absolute locations, report.md and report.html (with
    ``verbose``, the report's body first), then one verdict line per model (does it listen? — report.md and
    report.html open with the same)."""
    where = storage.absolute(root)
    if verbose:
        print(report)
    print(f"report: {storage.join(where, 'report.md')}")
    print(f"report: {storage.join(where, 'report.html')}")
    print(f"tables: {storage.join(where, 'tables')}/")
    for line in verdicts:
        print(line)


def _rows(n: int | None) -> str:
    return "–" if n is None else f"{n:,}"


def profile_lines(profile: dict) -> list[str]:
    """The closing lines of a run from its profile (run.json's ``profile``, :mod:`evalcore.pipeline.profile`): one
    per stage (a model's with how busy its actors were, its answers/s and its starved seconds), a line when the
    model that sets the pace waited for input more than 5 % of its stage, naming the stage that held it
    (:func:`evalcore.reports.run_profile.starved_notes`), when the first shard was committed, the run's wall."""
    out = []
    models = profile.get("models") or {}
    for s in profile.get("stages") or []:
        extra = f", busy {s['busy_s']:.1f} s" if s["where"] == "ray" else ""
        extra += f", held back {s['held_s']:.1f} s" if s.get("held_s") else ""
        first = f", first output at {s['first_output_s']:.1f} s" if s.get("first_output_s") is not None else ""
        m = models.get(s["stage"][len("model:"):]) if s["stage"].startswith("model:") else None
        model = (f"; {m['busy_fraction']:.0%} busy over {m['actors']} actor(s), {m['answers_per_s']:.1f} answers/s"
                 + (f", starved {m['starved_s']:.1f} s" if m.get("starved_s") is not None else "") if m else "")
        out.append(f"profile {s['stage']}: {s['wall_s']:.1f} s{extra}, {_rows(s['rows_in'])} → "
                   f"{_rows(s['rows_out'])} rows{first}{model}")
    out += [f"profile: {note}" for note in starved_notes(profile)]
    first = profile.get("first_commit")
    if first and first.get("after_model_start_s") is not None:
        out.append(f"profile: first shard committed {first['after_model_start_s']:.1f} s after the model stage "
                   f"started ({first['at_s']:.1f} s into the run)")
    if profile.get("wall_s") is not None:
        out.append(f"profile: {profile['wall_s']:.1f} s in all")
    return out
