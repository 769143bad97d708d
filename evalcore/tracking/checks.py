"""``evalcore validate`` of a ``tracking:`` block: what the config model cannot see.

The model (:mod:`evalcore.core.tracking_config`) refuses an unknown sink, an unknown field and an MLflow URI that cannot be
parsed or carries credentials. This adds, where paths are checked, a sink whose package does not import here, with
the command that installs it. (``evalcore run`` goes on without such a sink, with a warning: a tracker never
fails a run.)
"""

from __future__ import annotations

from typing import Sequence

from evalcore.tracking.sinks import Sink, install_hint, needs


def problems(sinks: Sequence[Sink]) -> list[str]:
    """One ``tracking.<i>.kind: …`` line per sink whose packages do not import here."""
    return [f"tracking.{i}.kind: the {s.kind} sink {install_hint(s.kind)}" for i, s in enumerate(sinks)
            if needs(s.kind)]
