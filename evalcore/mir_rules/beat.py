"""CMI-Bench's beat and downbeat rule (``beat_tracking`` of the released ``evaluate.py``, commit 4c15f410): GTZAN-Rhythm
and Ballroom beats and downbeats, scored by ``mir_eval.beat.f_measure`` (±70 ms) and ``mir_eval.beat.continuity``
(CMLt, AMLt), each a mean over items.

The released timestamp parser (:func:`timestamps`), for the response and the reference alike:

1. A list: its first element. Split on ``,``; strip each piece and delete **every** ``s`` in it ("0.5s" → "0.5",
   "1.0ss" → "1.0", "beats" → "beat").
2. A piece counts only if it starts with a digit: without ``:`` it is ``float(piece)``; with one it is
   ``int(minutes) * 60 + float(seconds)`` unless nothing follows the ``:``. A piece that starts with a digit but is
   not a number ("0.5 and 1.0", "1.2.3") makes the parse fail.
3. The times are sorted.

Per item, ``f_measure`` and (CMLt, AMLt) are computed by ``mir_eval`` as released (no trimming of the first 5 s:
the released code calls the metric functions, not ``mir_eval.beat.evaluate``); whatever fails — a parse, a time
``mir_eval`` rejects — scores 0 for that metric. ``answered`` (evalcore's addition): the response parsed to at
least one time. The released function prints the three means ×100 with two decimals (``F1: 7.50``); the test holds
evalcore to those strings and to the means themselves.
"""

from __future__ import annotations

import warnings
from importlib.metadata import version
from typing import Any, Mapping

import numpy as np

from evalcore.datasets.cmi_bench import Family
from evalcore.mir_rules.rules import RULES, Rule, reference_of
from evalcore.stats.aggregate import Aggregate, mean_of

__all__ = ["timestamps", "BeatRule"]


def timestamps(text: Any) -> np.ndarray:
    """The released parse of a timestamp list (module docstring); raises ``ValueError`` where it fails."""
    out: list[float] = []
    for piece in str(reference_of(text)).split(","):
        p = piece.strip().replace("s", "")
        if not p or not p[0].isdigit():
            continue
        if ":" not in p:
            out.append(float(p))
        elif p.split(":")[1] != "":
            minutes, seconds = p.split(":")[:2]
            out.append(int(minutes) * 60 + float(seconds))
    out.sort()
    return np.array(out)


def _safe(fn, *args) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # empty beats: mir_eval warns and scores 0, counted in `answered`
            return fn(*args)
    except Exception:  # noqa: BLE001 - the released code scores 0 whatever fails
        return None


@RULES.register(Family.BEAT)
class BeatRule(Rule):
    """F-measure, CMLt and AMLt of the released parse of response and reference (0 where anything fails)."""

    columns = ("f_measure", "cmlt", "amlt", "answered")
    aggregates = (
        Aggregate("f_measure", ("f_measure",), mean_of(),
                  f"CMI-Bench beat/downbeat F-measure (evaluate.py beat_tracking @ 4c15f410): mean over items of "
                  f"mir_eval.beat.f_measure {version('mir_eval')} (±70 ms) of the released timestamp parse; 0 where "
                  "the parse or the metric fails"),
        Aggregate("cmlt", ("cmlt",), mean_of(),
                  "mean over items of mir_eval.beat.continuity CMLt (correct metrical level, total); 0 where it fails"),
        Aggregate("amlt", ("amlt",), mean_of(),
                  "mean over items of mir_eval.beat.continuity AMLt (any metrical level, total); 0 where it fails"),
        Aggregate("answered", ("answered",), mean_of(), "share of responses parsed to at least one time"),
    )

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        import mir_eval  # heavy: scipy.stats (seconds); `evalcore --help` imports the metrics

        est = _safe(timestamps, response)
        ref = _safe(timestamps, reference)
        f = cont = None
        if est is not None and ref is not None:
            f = _safe(mir_eval.beat.f_measure, ref, est)
            cont = _safe(mir_eval.beat.continuity, ref, est)
        cmlt, amlt = (float(cont[1]), float(cont[3])) if cont is not None else (0.0, 0.0)
        return {"f_measure": float(f) if f is not None else 0.0, "cmlt": cmlt, "amlt": amlt,
                "answered": float(est is not None and len(est) > 0)}

    def versions(self) -> dict[str, str]:
        return {"mir_eval": version("mir_eval")}
