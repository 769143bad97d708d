"""Which attempt of a run may still commit: claims under ``<root>/_attempts/`` and the fence every commit passes.

A resumed run (``evalcore run --resume``, or a nightly resuming a checkpoint another nightly had started) first
*claims* its attempt: ``_attempts/attempt-<n>.json``, ``n`` one more than every earlier attempt (claimed or seen in
a commit marker), written before it touches anything of the earlier attempts. Every shard commit
(:func:`evalcore.pipeline.commit.commit_shard`, on the driver and on Ray workers alike) checks, after writing its
data files and before its marker, that no later attempt has claimed the root (:func:`check_current`); if one has,
the commit raises :class:`Superseded` and the stream stops there. So a process that stalled (a stopped machine, a
nightly past its lease) and wakes up after another attempt took the run over commits nothing more: its rows are
never counted twice, and it stops at its next commit instead of running its remaining requests.

What is left open: a commit whose fence check falls between the new attempt's claim being written and being
visible (an S3 PUT is visible when it returns; a local rename at once) — a window of one small write.
"""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Iterable

from evalcore.core import storage

ATTEMPTS = "_attempts"
#: every message of :class:`Superseded` starts with it (found again through Ray's wrapping of worker errors)
SUPERSEDED = "superseded:"


class Superseded(RuntimeError):
    """A later attempt has claimed the run root: this attempt commits nothing more."""


def _claim(root: str, n: int) -> str:
    return storage.join(root, ATTEMPTS, f"attempt-{n}.json")


def latest(root: str) -> int:
    """The highest attempt number claimed at ``root`` (-1 when none is)."""
    found = [-1]
    for uri in storage.list_files(storage.join(root, ATTEMPTS), ".json"):
        name = uri.rsplit("/", 1)[-1]
        if name.startswith("attempt-") and name[len("attempt-"):-len(".json")].isdigit():
            found.append(int(name[len("attempt-"):-len(".json")]))
    return max(found)


def claim_next(out: storage.RunStorage, committed: Iterable[int]) -> int:
    """Claim the attempt after every earlier one (``committed``: the attempts of the run's commit markers; the first
    attempt, 0, need not have claimed); returns its number."""
    n = 1 + max([0, latest(out.root), *committed])
    out.write_text(_claim(out.root, n), json.dumps({"attempt": n, "host": socket.gethostname(), "pid": os.getpid(),
                                                    "claimed": time.time()}))
    return n


def check_current(root: str, attempt: int) -> None:
    """Raise :class:`Superseded` when an attempt after ``attempt`` has claimed ``root`` (claims are numbered one
    after another, so the next one's claim is what to look for)."""
    if storage.exists(_claim(root, attempt + 1)):
        raise Superseded(f"{SUPERSEDED} attempt {attempt + 1} has taken over {root} (a resume elsewhere, or a nightly "
                         f"that took this checkpoint's lease over); attempt {attempt} commits nothing more")


def superseded(e: BaseException) -> bool:
    """Whether ``e`` (or an error it wraps, e.g. a Ray task error from the commit stage) is :class:`Superseded`."""
    seen: BaseException | None = e
    for _ in range(16):  # a chain is short; bounded all the same
        if seen is None:
            return False
        if isinstance(seen, Superseded) or SUPERSEDED in str(seen)[:2000]:
            return True
        seen = seen.__cause__ or seen.__context__ or getattr(seen, "cause", None)
    return False
