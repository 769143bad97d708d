"""The most of an answer each CMI-Bench rule family reads: a cap on characters (and, for beat timestamps, on
comma-separated pieces), applied **before** any parsing, so one answer costs each rule at most about a second
(``benchmarks/hostile_answers.py`` measures the longest allowed answer of each family; docs/cmi-bench.md, "Bad
answers").

An answer over its cap is **cut, and the cut counted** (the per-item column ``truncated``: characters removed),
not turned into an error row: an error row leaves the item out of every mean, so a model that babbles past the cap
would lose a bad score; the cut answer is scored by the released rule as the model's answer, and the count says
it was cut. Each cap is far above any answer the task asks for (the longest released reference of each family is
below a tenth of it), so an answer a model gives in earnest is never cut. A cut ends where the family's parser
reads a whole unit: after the last ``,`` (beat timestamps), after the last ``)`` (melody pairs), at the last
space (words), so no number is cut in half. A reference over the cap is the dataset's or the input file's
problem, not the model's: that request is an error row of class ``input``.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalcore.datasets.cmi_bench import Family

__all__ = ["Cap", "CAPS", "cut"]


@dataclass(frozen=True)
class Cap:
    """An answer's cap: ``chars`` characters, at most ``pieces`` ``sep``-separated pieces (0: no piece cap); a
    cut ends after the last ``end`` within the cap (none there: at the cap)."""

    chars: int
    end: str = " "
    pieces: int = 0
    sep: str = ","


#: rule (its family) → its cap (the released references: DSing lines < 300 characters; GTZAN/Ballroom beats < 150 timestamps
#: per 30-s clip; MedleyDB 10-s melodies < 1,800 pairs, < 35,000 characters; every label, key or rating < 100)
CAPS: dict[str, Cap] = {
    Family.LYRICS: Cap(10_000),
    Family.BEAT: Cap(20_000, end=",", pieces=1_000),
    Family.MELODY: Cap(100_000, end=")"),
    Family.TECHNIQUE: Cap(20_000, end=")"),
    Family.KEY: Cap(20_000),
    Family.MULTICLASS: Cap(20_000),
    Family.REGRESSION: Cap(20_000),
    Family.TAGGING: Cap(20_000),
}
#: a rule without its own cap
DEFAULT = Cap(20_000)


def cut(rule: str, text: str) -> tuple[str, int]:
    """``text`` within ``rule``'s cap, and the number of characters cut (0: as it was)."""
    cap = CAPS.get(rule, DEFAULT)
    limit = cap.chars
    if cap.pieces:
        at, n = -1, 0
        while n < cap.pieces:
            at = text.find(cap.sep, at + 1, limit)
            if at == -1:
                break
            n += 1
        if n == cap.pieces:  # the text holds more pieces within the char cap: end before the next separator
            limit = at
    if len(text) <= limit:
        return text, 0
    kept = text[:limit]
    if cap.end and limit == cap.chars:
        last = kept.rfind(cap.end)
        if last > 0:
            kept = kept[:last + (len(cap.end) if cap.end == ")" else 0)]
    return kept, len(text) - len(kept)
