"""Checkpoint discovery: the direct sub-prefixes of a series' prefix, ready or not, in natural order."""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalcore.core import storage
from evalcore.core.nightly_outcome import CheckpointKey
from evalcore.nightly.config import SeriesConfig

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple:
    """Sort key with digit runs compared as numbers: ``step-999`` < ``step-1000``."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.lower()) for p in _DIGITS.split(name) if p)


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of a series found under its prefix; ``problem`` says why it is not evaluated yet (no ready
    marker)."""

    key: CheckpointKey
    uri: str
    problem: str | None = None

    @property
    def name(self) -> str:
        """The checkpoint's name (its sub-prefix)."""
        return self.key.checkpoint


class SeriesUnreadable(OSError):
    """The series prefix could not be listed."""


def discover(series: SeriesConfig) -> list[Checkpoint]:
    """Every checkpoint under the series prefix, oldest first; raises :class:`SeriesUnreadable`."""
    try:
        names = storage.list_dirs(series.prefix)
    except OSError as e:
        raise SeriesUnreadable(f"series {series.name}: cannot list {series.prefix}: {e}") from None
    out = []
    for name in sorted((n for n in names if not n.startswith((".", "_"))), key=natural_key):
        uri = storage.join(series.prefix, name)
        problem = None
        if series.ready_marker:
            try:
                ready = storage.exists(storage.join(uri, series.ready_marker))
            except OSError as e:
                ready, problem = False, f"unreadable: {e}"
            if not ready and problem is None:
                problem = f"not ready: no {series.ready_marker} marker"
        out.append(Checkpoint(CheckpointKey(series.name, name), uri, problem))
    return out
