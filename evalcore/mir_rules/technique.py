"""CMI-Bench's playing-technique rule (``convert_to_frame_labels`` / ``calculate_frame_f1`` of the released
``evaluate.py``, commit 4c15f410): GuZheng Tech99 technique detection, scored by frame-level micro and macro F1
over 7 techniques, 100 frames a second over a 10-s clip.

The released event parser (:func:`frames`), for the response and the reference alike:

1. From the first ``[`` to the **first** ``)``, plus ``)]``, is evaluated as Python (evalcore:
   :func:`evalcore.mir_rules.rules.literal`, never ``eval``); a leading ``["[`` loses two characters. So
   **only the first event of a list is ever read**, of the reference as of the response. No ``[`` before a ``)``:
   the clip is "No Tech".
2. An empty list is "No Tech". Dicts give (start, end, technique); triples whose start text begins with a digit
   give (float, float, text) — none left: "No Tech".
3. Times are folded into the clip: start mod 10, (end − 10⁻⁴) mod 10 + 10⁻⁴; labels normalised
   (:func:`evalcore.mir_rules.rules.normalise`). One event labelled "No Tech": no frame is on.
4. Each event turns on frames int(start·100) … int(end·100) − 1 of its technique.

Per item the frame counts (TP, FP, FN over the 1000 × 7 frame grid, and per technique) are columns; the figures pool
them over items: micro F1 from the pooled counts, macro F1 the mean over the 7 techniques of each one's F1 from its
pooled counts (0 where a precision, recall or F1 has no denominator), as released. **The released script prints the
two swapped**: ``calculate_frame_f1`` returns (micro, macro) and the caller names them (``Marco F1``, ``Micro F1``)
in that order; evalcore names them by what they are.

Where the released scorer stops (counted, never guessed: error rows): step 1 failing to evaluate (the released code
goes on with the text itself and fails), a technique outside the seven ("No Tech" among other events included),
dicts without their keys, times that are not finite.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from evalcore.datasets.cmi_bench import Family
from evalcore.mir_rules.rules import RULES, PublishedStops, Rule, Unreproducible, literal, normalise
from evalcore.stats.aggregate import Aggregate, safe_ratio

__all__ = ["TECHNIQUES", "frames", "TechniqueRule"]

#: the seven techniques, in the released order
TECHNIQUES = ("Vibrato", "Point Note", "Upward Portamento", "Downward Portamento", "Plucks", "Glissando", "Tremolo")
_CLASSES = [normalise(t) for t in TECHNIQUES]
_NONE = [("0", "10", "No Tech")]
RATE, SECONDS = 100, 10


def _events(text: str) -> Any:
    start, end = text.find("["), text.find(")")
    if start == -1 or start >= end:
        return list(_NONE)
    s = text[start:end] + ")]"
    if s.startswith('["['):
        s = s[2:]
    try:
        return literal(s)
    except Unreproducible:
        raise
    except Exception as e:  # noqa: BLE001 - the released code keeps the text and fails on it later
        raise PublishedStops(f"the events do not evaluate ({type(e).__name__}): the released scorer stops "
                             "there") from None


def frames(text: Any) -> np.ndarray:
    """The (1000, 7) frame grid of the released parse of ``text`` (module docstring)."""
    if not isinstance(text, str):
        raise PublishedStops("events that are not text: the released scorer stops there")
    events = _events(text)
    try:
        if len(events) == 0:
            events = list(_NONE)
        if isinstance(events, list) and isinstance(events[0], dict):
            events = [(float(e["start"]), float(e["end"]), e["technique"]) for e in events]
        elif isinstance(events, list) and all(isinstance(e, tuple) and len(e) == 3 for e in events):
            try:
                kept = [(float(e[0]), float(e[1]), str(e[2])) for e in events if e[0][0].isdigit()]
                events = kept or [(0, 10, "No Tech")]
            except Exception:  # noqa: BLE001 - the released code prints and goes on with the events as they were
                pass
        try:
            events = [(s % 10, (e - 1e-4) % 10 + 1e-4, normalise(label)) for s, e, label in events]
        except Exception:  # noqa: BLE001 - likewise
            pass
        grid = np.zeros((int(np.ceil(SECONDS * RATE)), len(_CLASSES)))
        if len(events) == 1 and normalise(events[0][-1]) == "notech":
            return grid
        for ev in events:
            grid[int(float(ev[0]) * RATE):int(float(ev[1]) * RATE), _CLASSES.index(normalise(ev[2]))] = 1
        return grid
    except PublishedStops:
        raise
    except Exception as e:  # noqa: BLE001 - uncaught in the released code: the script stops
        raise PublishedStops(f"the events cannot be placed on frames ({type(e).__name__}): the released scorer "
                             "stops there") from None


def _f1(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> np.ndarray:
    """The released F1: 2PR/(P+R), each of P, R and F1 0 where its denominator is 0."""
    p = safe_ratio(tp, tp + fp, 0.0)
    r = safe_ratio(tp, tp + fn, 0.0)
    return safe_ratio(2 * p * r, p + r, 0.0)


def _micro(m: np.ndarray) -> np.ndarray:
    return _f1(m[..., 0], m[..., 1], m[..., 2])


def _macro(m: np.ndarray) -> np.ndarray:
    k = len(_CLASSES)
    return np.mean([_f1(m[..., 3 + i], m[..., 3 + k + i], m[..., 3 + 2 * k + i]) for i in range(k)], axis=0)


_PER_CLASS = tuple(f"{c}_{t}" for c in ("tp", "fp", "fn") for t in _CLASSES)


@RULES.register(Family.TECHNIQUE)
class TechniqueRule(Rule):
    """Frame TP/FP/FN (all techniques and per technique) of the released parse; pooled micro and macro F1."""

    columns = ("frame_tp", "frame_fp", "frame_fn", *_PER_CLASS)
    aggregates = (
        Aggregate("frame_f1_micro", ("frame_tp", "frame_fp", "frame_fn"), _micro,
                  "CMI-Bench GuZheng frame micro F1 (evaluate.py calculate_frame_f1 @ 4c15f410, printed there as "
                  "'Marco F1'): F1 of the frame counts pooled over items and techniques, 100 frames/s, 10 s; only the "
                  "first event of each list is read (released parser)"),
        Aggregate("frame_f1_macro", ("frame_tp", "frame_fp", "frame_fn", *_PER_CLASS), _macro,
                  "CMI-Bench GuZheng frame macro F1 (printed there as 'Micro F1'): mean over the 7 techniques of the "
                  "F1 of each one's pooled frame counts (0 where undefined)"),
    )

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        est, ref = frames(response), frames(reference)
        t, p = ref == 1, est == 1
        tp, fp, fn = (t & p).sum(axis=0), (~t & p).sum(axis=0), (t & ~p).sum(axis=0)
        out = {"frame_tp": float(tp.sum()), "frame_fp": float(fp.sum()), "frame_fn": float(fn.sum())}
        for name, counts in (("tp", tp), ("fp", fp), ("fn", fn)):
            out.update({f"{name}_{c}": float(v) for c, v in zip(_CLASSES, counts)})
        return out
