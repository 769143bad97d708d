"""CMI-Bench's key rule (``key_ensamble_score`` of the released ``evaluate.py``, commit 4c15f410): GiantSteps key,
scored by ``mir_eval.key.weighted_score`` (1 same key, 0.5 a fifth, 0.3 relative, 0.2 parallel, else 0).

The released response parser (:func:`parse_key`):

1. Lower-case the response, drop every space and every digit.
2. Three characters or fewer ending in ``m``: append ``inor`` ("am" → "aminor"); else two characters or fewer:
   append ``major`` ("c" → "cmajor").
3. A sharp as the second character (``#`` or ``♯``) after c, d, f, g or a becomes that note's flat spelling
   (``c#`` → ``db``); a sharp after another letter ("e#", "b#") is a key the map lacks — the released code fails
   there, and the response scores 0.
4. The key is the **first** of the 24 classes, in the released order (C major … B major, C minor … B minor),
   whose text without spaces occurs in what is left ("abminor" → Ab minor before B minor; "the key is f major
   or c major" → C major, which comes first in the list).

The item's score is ``mir_eval.key.weighted_score(reference, key)``; the released code scores 0 wherever anything
fails (no key found, a sharp the map lacks, a reference ``mir_eval`` rejects). The figure is the
mean over items. ``answered`` (evalcore's addition): the parser found a key.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any, Mapping


from evalcore.datasets.cmi_bench import Family
from evalcore.mir_rules.rules import RULES, Rule, reference_of
from evalcore.stats.aggregate import Aggregate, mean_of

__all__ = ["CLASSES", "parse_key", "KeyRule"]

_TONICS = ("C", "Db", "D", "Eb", "E", "F", "Gb", "G", "Ab", "A", "Bb", "B")
#: the released 24 classes, in the released order (the parser takes the first that occurs)
CLASSES = tuple(f"{t} {m}" for m in ("major", "minor") for t in _TONICS)
_FLATS = {"c": "db", "d": "eb", "f": "gb", "g": "ab", "a": "bb"}


def parse_key(response: str) -> str | None:
    """The key the released parser reads in ``response`` (module docstring), or None."""
    s = "".join(ch for ch in response.lower().replace(" ", "") if not ch.isdigit())
    if len(s) <= 3 and s.endswith("m"):
        s += "inor"
    elif len(s) <= 2:
        s += "major"
    if s[1] in ("#", "\u266f"):
        flat = _FLATS.get(s[0])
        if flat is None:
            return None  # the released map lacks it and fails
        s = flat + s[2:]
    return next((c for c in CLASSES if c.lower().replace(" ", "") in s), None)


@RULES.register(Family.KEY)
class KeyRule(Rule):
    """``mir_eval.key.weighted_score`` of the released parser's key against the reference (0 when none)."""

    columns = ("key_score", "answered")
    aggregates = (
        Aggregate("key_weighted_score", ("key_score",), mean_of(),
                  "CMI-Bench key score (evaluate.py key_ensamble_score @ 4c15f410): mean over items of "
                  f"mir_eval.key.weighted_score {version('mir_eval')} (1 / 0.5 fifth / 0.3 relative / 0.2 parallel) "
                  "of the key the released parser reads; 0 where it reads none"),
        Aggregate("answered", ("answered",), mean_of(), "share of responses in which the released parser reads a key"),
    )

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        import mir_eval  # heavy: scipy.stats (seconds); `evalcore --help` imports the metrics

        key = parse_key(str(response))
        value = 0.0
        if key is not None:
            try:
                value = float(mir_eval.key.weighted_score(str(reference_of(reference)), key))
            except (ValueError, AttributeError):  # a reference mir_eval rejects: the released code scores 0
                value = 0.0
        return {"key_score": value, "answered": float(key is not None)}

    def versions(self) -> dict[str, str]:
        return {"mir_eval": version("mir_eval")}
