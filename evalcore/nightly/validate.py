"""``evalcore validate`` of a nightly config: what a night would find, without evaluating anything.

:func:`evalcore.nightly.config.parse_nightly` has checked every field and each series' model template as a run
config. This adds, per series, what lies outside the config (only when paths are checked; ``--no-check-paths``
reports each prefix as unchecked in one line):

- the prefix is readable: a local directory that exists, or an ``s3://`` prefix that lists within
  :data:`LIST_TIMEOUT_S`. A *relative* local prefix is read under the nightly root (``storage.root``, else
  ./runs/<name>), as ``evalcore nightly`` reads it; since the nightly writes that root itself, a relative prefix
  that is not there yet is a note, not a mistake (the embedded demo writes its checkpoints there on its first night);
- the baseline is one of the checkpoints found (when any is);
- the suite's and the template's params pass :mod:`evalcore.runconfig.preflight` with ``checkpoint_param`` set to the first
  ready checkpoint found; with none found yet, that one param is left unchecked (and said so).
"""

from __future__ import annotations

import difflib
import os
import threading
from dataclasses import dataclass, field

from evalcore.runconfig import preflight

from evalcore.core import storage
from evalcore.nightly.config import NightlyConfig, SeriesConfig, as_series_field, resolve_prefixes, run_config
from evalcore.nightly.series import Checkpoint, discover

#: seconds a series prefix may take to list before validate gives up on it (an unreachable S3 endpoint retries)
LIST_TIMEOUT_S = 30.0


@dataclass
class Findings:
    """What validate found: ``problems`` (``<field>: <reason>``, exit 2) and ``notes`` (one line per series)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def list_bounded(series: SeriesConfig, timeout_s: float = LIST_TIMEOUT_S) -> list[Checkpoint]:
    """:func:`evalcore.nightly.series.discover` within ``timeout_s``; raises ``OSError`` when it fails or is late."""
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["found"] = discover(series)
        except Exception as e:  # noqa: BLE001 - reported as the prefix's problem
            box["error"] = e

    t = threading.Thread(target=storage.carried(work), name=f"list-{series.name}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise OSError(f"listing took longer than {timeout_s:.0f} s")
    if "error" in box:  # discover's message names the series and prefix; the caller names them already
        raise OSError(str(box["error"]).split(f"cannot list {series.prefix}: ", 1)[-1].splitlines()[0][:300])
    return box["found"]  # type: ignore[return-value]


def check_series(cfg: NightlyConfig, i: int, given: str, found: Findings, datasets: bool) -> None:
    """Check series ``i`` (its prefix already resolved; ``given`` is the prefix as written) into ``found``."""
    s = cfg.series[i]
    where = f"series.{i}.prefix"
    how = f"{given!r} (relative: read under the nightly root → {s.prefix})" if given != s.prefix else repr(s.prefix)
    if not storage.is_s3(s.prefix) and not os.path.exists(os.path.expanduser(s.prefix.removeprefix("file://"))):
        if given != s.prefix:
            found.notes.append(f"series {s.name}: prefix {how} does not exist yet; a night finds no checkpoint "
                               "until it does")
        else:
            found.problems.append(f"{where}: {s.prefix!r} does not exist")
        cps: list[Checkpoint] = []
    else:
        try:
            cps = list_bounded(s)
        except OSError as e:
            found.problems.append(f"{where}: cannot list {s.prefix!r}: {e}")
            return
        ready = [c for c in cps if c.problem is None]
        found.notes.append(f"series {s.name}: prefix {how}: {len(cps)} checkpoint(s), {len(ready)} ready"
                           + (f" (no {s.ready_marker} in: {', '.join(c.name for c in cps if c.problem)[:200]})"
                              if len(ready) < len(cps) else ""))
    names = [c.name for c in cps]
    if s.baseline is not None and names and s.baseline not in names:
        close = difflib.get_close_matches(s.baseline, names, n=1, cutoff=0.6)
        found.problems.append(f"series.{i}.baseline: no checkpoint {s.baseline!r} under {s.prefix}; "
                              + (f"did you mean {close[0]!r}?" if close else f"found: {', '.join(names)[:200]}"))
    first = next((c for c in cps if c.problem is None), None)
    uri = first.uri if first is not None else s.prefix
    rcfg = run_config(cfg, s, first.name if first else "checkpoint", uri, cfg.root)
    lines = [as_series_field(x, i) for x in preflight.problems(rcfg, check_paths=True, datasets=datasets)]
    param = f"series.{i}.model.params.{s.model.checkpoint_param}"
    if first is None:
        lines = [x for x in lines if not x.startswith((param + ":", param + "."))]
        found.notes.append(f"series {s.name}: {param} not checked (no ready checkpoint found)")
    else:
        found.notes.append(f"series {s.name}: model params checked with {param} = {first.uri}")
    found.problems += [x for x in lines if x not in found.problems]


def check(cfg: NightlyConfig, check_paths: bool = True) -> Findings:
    """Every series of ``cfg`` (relative prefixes as written; they are resolved under the root here)."""
    found = Findings()
    if not check_paths:
        found.notes += [f"series {s.name}: prefix {s.prefix} not checked (--no-check-paths)" for s in cfg.series]
        return found
    given = [s.prefix for s in cfg.series]
    with storage.using(cfg.storage.settings()):  # the series' prefixes, as the nightly reaches them
        resolved = resolve_prefixes(cfg)
        for i in range(len(cfg.series)):
            check_series(resolved, i, given[i], found, datasets=i == 0)
    return found
