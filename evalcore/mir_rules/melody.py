"""CMI-Bench's melody rule (``process_midi_sequence`` / ``melody_evaluation`` of the released ``evaluate.py``, commit
4c15f410): MedleyDB v2 melody extraction, scored by ``mir_eval.melody.evaluate``'s Overall Accuracy per item.

The released sequence parser (:func:`sequence`), for the response and the reference alike (references are written
``[('10.0058', 0), ('10.0116', 55), …]``: time text, MIDI number):

1. Not text: no sequence. Braces: ``{'time':`` → ``(``, ``'MIDI_number':`` → nothing, ``}`` → ``)``; braces left:
   no sequence. ``♯`` → ``#``, ``♭`` → ``b``. Under two characters: none. A character after a final ``]`` is cut.
2. The text is evaluated as Python (evalcore: :func:`evalcore.mir_rules.rules.literal`, never ``eval``). An
   unterminated string: the part from the first ``[`` before the last ``)`` up to it, plus ``)]``, is evaluated
   instead; an unclosed ``[``: the text plus ``]``. Another syntax error, an unknown name or a call of a literal:
   the ``(…)`` groups are read as (text before the first comma, text after it).
3. Not a list of pairs: none. Times given as ``'m:ss'`` become seconds; a time in extra quotes (``"'0.5'"``) is
   mangled by the released code and the sequence is lost. Times must read as numbers; the sequence is sorted by
   time, the first pair of each time kept, and times are shifted by ``floor(first / 10) * 10`` (the 10-s clips of
   a track start at 0).
4. Notes: a number (text or not) is a MIDI number, else a note name read by ``pretty_midi.note_name_to_number``,
   else MIDI 0; each then becomes Hz by ``pretty_midi.note_number_to_hz``, so **MIDI 0 is 8.18 Hz, a voiced
   frame** (the references mark unvoiced frames with 0); only an empty note is 0 Hz.

Per item: no sequence on either side scores 0; otherwise ``mir_eval.melody.evaluate(reference, response)``'s
Overall Accuracy, and an item where ``mir_eval`` fails is **left out of the mean** (the released loop skips it):
``counted`` 0. The figure is the mean over the counted items.

Where the released scorer stops (counted, never guessed: error rows): the repaired text of step 2 still failing;
a time that is neither a float nor text (``[(0, 60)]``: the released code calls ``.startswith`` on it); a note
``pretty_midi`` cannot turn into Hz; ``eval`` failing otherwise. Where evalcore will not evaluate what ``eval``
would compute (arithmetic, builtins): :class:`~evalcore.mir_rules.rules.Unreproducible`, also an error row.
"""

from __future__ import annotations

import re
import warnings
from importlib.metadata import version
from typing import Any, Mapping

import numpy as np

from evalcore.datasets.cmi_bench import Family
from evalcore.mir_rules.rules import RULES, PublishedStops, Rule, Unreproducible, literal
from evalcore.stats.aggregate import Aggregate, mean_of, safe_ratio

__all__ = ["sequence", "MelodyRule"]

_PAIR = re.compile(r"\(([^)]+)\)")


def _evaluated(s: str) -> Any:
    """Step 2: the released evaluation of the text and its repairs; None where it gives up."""
    try:
        return literal(s)
    except (SyntaxError, NameError, TypeError) as e:
        if "unterminated string literal" in str(e):
            last = s.rfind(")")
            start = s.find("[", 0, last)
            if start == -1:
                return None
            return _repaired(s[start:last] + ")]")
        if "'[' was never closed" in str(e):
            return _repaired(s + "]")
        pairs = []
        for m in _PAIR.findall(s):
            parts = m.split(",")
            if len(parts) < 2:
                return None  # the released comprehension fails inside its try: no sequence
            pairs.append((parts[0], parts[1]))
        return pairs


def _repaired(s: str) -> Any:
    try:
        return literal(s)
    except Unreproducible:
        raise
    except Exception as e:  # noqa: BLE001 - the released code re-raises: the script stops
        raise PublishedStops(f"the repaired sequence does not evaluate ({type(e).__name__}): the released scorer "
                             "stops there") from None


def _hz(note: Any) -> float:
    import pretty_midi  # heavy: mido and its backends; `evalcore --help` imports the metrics
    if isinstance(note, str):
        if note == "":
            return 0.0
        try:
            number: Any = float(note)
        except ValueError:
            try:
                number = pretty_midi.note_name_to_number(note)
            except Exception:  # noqa: BLE001 - the released code takes MIDI 0 for what it cannot read
                number = 0
        note = number
    try:
        return float(pretty_midi.note_number_to_hz(note))
    except Exception as e:  # noqa: BLE001
        raise PublishedStops(f"a note pretty_midi cannot turn into Hz ({type(note).__name__}): the released scorer "
                             "stops there") from e


def sequence(text: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """(times, Hz) by the released parser (module docstring), or None; raises :class:`PublishedStops` /
    :class:`Unreproducible` where the released scorer stops / evaluates what evalcore will not."""
    if not isinstance(text, str):
        return None
    s = text
    if "{" in s or "}" in s:
        s = s.replace("{'time':", "(").replace("'MIDI_number':", "").replace("}", ")")
    if "{" in s or "}" in s:
        return None
    s = s.replace("\u266f", "#").replace("\u266d", "b")
    if len(s) < 2:
        return None
    s = s[:-1] if s[-2] == "]" else s
    seq = _evaluated(s)
    if not isinstance(seq, list) or not all(isinstance(p, tuple) and len(p) == 2 for p in seq):
        return None
    for i, pair in enumerate(seq):
        if isinstance(pair[0], float):
            continue
        if not isinstance(pair[0], str):
            raise PublishedStops(f"a time that is a {type(pair[0]).__name__}, not a float or text: the released "
                                 "scorer stops there")
        if pair[0].startswith("'") and pair[0].endswith("'"):
            seq[i] = ((), pair[1])  # the released code slices the pair, not its time: the time is lost
        if ":" in pair[0]:
            try:
                seq[i] = (float(pair[0].split(":")[1]) + float(pair[0].split(":")[0]) * 60, pair[1])
            except ValueError:
                return None
    try:
        seq = [(float(t), n) for t, n in seq]
    except (TypeError, ValueError):
        return None
    first: dict[float, tuple] = {}
    for pair in sorted(seq, key=lambda p: p[0]):
        first.setdefault(pair[0], pair)
    seq = sorted(first.values(), key=lambda p: p[0])
    if not seq:
        return None
    if any(isinstance(n, (list, tuple, dict, set)) for _, n in seq):
        raise PublishedStops("a note that is a container: the released array of pairs cannot be built")
    shift = seq[0][0] // 10 * 10
    times = np.array([t - shift for t, _ in seq], dtype=float)
    return times, np.array([_hz(n) for _, n in seq], dtype=float)


@RULES.register(Family.MELODY)
class MelodyRule(Rule):
    """Overall Accuracy (``mir_eval.melody.evaluate``) of the released parse; items it fails on left out."""

    columns = ("overall_accuracy", "counted")
    aggregates = (
        Aggregate("melody_accuracy", ("overall_accuracy", "counted"),
                  lambda m: safe_ratio(m[..., 0], m[..., 1], np.nan),
                  f"CMI-Bench melody accuracy (evaluate.py melody_evaluation @ 4c15f410): mean of mir_eval.melody "
                  f"{version('mir_eval')} Overall Accuracy over the items it scores (0 where either sequence does not "
                  "parse; items where mir_eval fails left out, as released); MIDI 0 is 8.18 Hz (pretty_midi)"),
        Aggregate("counted", ("counted",), mean_of(), "share of items the released loop counts (mir_eval did not fail)"),
    )

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        import mir_eval  # heavy: scipy.stats (seconds); `evalcore --help` imports the metrics

        est, ref = sequence(response), sequence(reference)
        if est is None or ref is None:
            return {"overall_accuracy": 0.0, "counted": 1.0}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                acc = float(mir_eval.melody.evaluate(ref[0], ref[1], est[0], est[1])["Overall Accuracy"])
        except Exception:  # noqa: BLE001 - the released loop prints the item and leaves it out
            return {"overall_accuracy": 0.0, "counted": 0.0}
        return {"overall_accuracy": acc, "counted": 1.0}

    def versions(self) -> dict[str, str]:
        return {"mir_eval": version("mir_eval"), "pretty_midi": version("pretty_midi")}
