"""Deterministic label extraction against a closed vocabulary (the factual protocol's rules).

This is a rule-based stand-in for the LLM extractor of "Factual and musical metrics for
Music LMs" (§4.1, Appendix B.1), used by the ``lexicon`` judge (:mod:`evalcore.judges.lexicon`), by the
loaders to bring ground-truth labels to canonical form (:mod:`evalcore.vocab.normalize`) and by the
true/false and binary-choice readers. It follows the same rules, deterministically:

1. **Explicit mentions only.** A label is returned only if one of its surface forms appears
   in the text as a whole word/phrase (case-insensitive; a space inside a surface form also
   matches a hyphen or several spaces). Nothing is inferred from style ("swing" ≠ jazz), and a
   hyphenated ``-like``/``-esque``/``-ish`` suffix ("a piano-like timbre") is not a mention.
2. **Longest match wins.** Surface forms are matched leftmost-longest, so "bass guitar" and
   "double bass" give ``bass`` (not ``guitar``), "bass clarinet" gives ``clarinet`` (not
   ``bass``) and "bass drum" gives ``drums``. A lexicon may also list *ignored* phrases that
   are consumed without producing a label ("drum and bass" the genre, "english horn").
3. **Canonical forms and plurals.** Each surface form maps to its canonical label; the plural
   of every surface form (last word + s / es / ies) is added automatically.
4. **Negation.** A mention is dropped when it is negated:

   * *before it*: a negation cue (``no``, ``not``, ``never``, ``without``, ``neither``,
     ``nor``, ``none``, ``cannot``, any ``…n't`` such as ``isn't``/``can't hear``, ``lack(s)``,
     ``absence of``, ``free of``, ``devoid of``) stands at most five words earlier in the same
     clause, with no punctuation, no other mention and no contrast word (``but``, ``only``,
     ``except``, ``besides``, ``other``, ``than``, ...) in between. Hedges are not
     negations: ``not sure``, ``not certain``, ``not clear``, ``not only``, ``not just``,
     ``no doubt``, ``don't know``, ``can't tell``.
   * *after it*: "X is not present/heard/audible/used/played/included", "X is absent/missing",
     "X cannot be heard", "X doesn't play/appear", "X: none".

   A negation covers a whole coordinated list: "no drums, guitars or bass" drops all three,
   "neither piano nor violin" both. Items of a list are mentions separated only by ``,`` ``/``
   ``&`` ``and`` ``or`` ``plus`` ``as well as``, articles, hedges (``maybe``, ``possibly``) and
   at most one modifier word right before the next item ("no drums or distorted guitars").
   Consequence (documented limit): "no vocals and piano" drops both.
5. **Comparatives.** Only the preferred entity is kept: "X rather than Y", "X instead of Y",
   "X as opposed to Y" drop Y; "than" drops what follows it when the clause before it holds a
   mention and ``more``/``rather``/``closer`` ("more like a viola than a violin",
   "guitar more than piano"). Plain comparisons ("the piano is louder than the drums") keep
   both, and "more than two guitars" keeps the guitars.
6. **Dedupe, order.** Labels are returned once each, in order of first non-negated mention;
   the empty list when nothing is mentioned.
"""

from __future__ import annotations

import bisect
import re

from evalcore.vocab.lexicon import Lexicon

__all__ = ["extract"]

# --- negation / comparative machinery -------------------------------------------------------

_TRIGGER = re.compile(
    r"\b(?:no|not|never|without|neither|nor|none|cannot|lacks?|lacking|absence\s+of|"
    r"free\s+of|devoid\s+of|instead\s+of|rather\s+than|as\s+opposed\s+to|\w+n't)\b",
    re.IGNORECASE,
)
# hedges and idioms that look like negation cues but are not
_NOT_A_TRIGGER = re.compile(
    r"(?:no\s+(?:doubt|matter|question)|not\s+(?:only|just|sure|certain|clear|entirely|quite\s+sure)"
    r"|\w+n't\s+(?:know|tell|be\s+sure))\b",
    re.IGNORECASE,
)
_THAN = re.compile(r"(?<!rather )\bthan\b", re.IGNORECASE)
_PREFERENCE = re.compile(r"\b(?:more|rather|closer)\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.;:!?\n()\[\],]")
_BREAK_WORDS = {
    "but", "however", "although", "though", "whereas", "while", "yet", "only", "just",
    "except", "besides", "apart", "aside", "other", "instead", "than", "rather", "also",
}
_CONNECTORS = {
    "and", "or", "plus", "as", "well", "a", "an", "any", "some", "even", "either",
    "maybe", "possibly", "perhaps", "probably",
}
_STOP = {
    "the", "this", "that", "these", "those", "it", "its", "their", "his", "her", "is", "are",
    "was", "were", "be", "has", "have", "had", "with", "there", "which", "who", "in", "on",
    "of", "to", "by", "for", "at", "from", "no", "not", "nor", "neither", "without", "never",
    # contractions start a new clause, they are not a modifier ("not rock, it's pop")
    "it's", "that's", "there's", "here's", "i'm", "i'd", "we're", "they're",
}
_POST_NEGATION = re.compile(
    r"\s*(?:(?:is|are|was|were)\s*(?:not|n't|never)\s+(?:\w+\s+)?"
    r"(?:present|heard|audible|used|played|playing|included|featured|there|detectable)"
    r"|(?:do|does|did)\s*(?:not|n't)\s+(?:\w+\s+)?(?:play|appear|feature)"
    r"|(?:can|could)\s*(?:not|n't)\s+be\s+(?:heard|detected)"
    r"|(?:is|are|was|were)\s+(?:\w+ly\s+)?(?:absent|missing|nowhere)"
    r"|[:\-\u2013]\s*(?:none|no|absent|missing))\b",
    re.IGNORECASE,
)
_LIKE_SUFFIX = re.compile(r"-(?:like|esque|ish)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z']+|[^\sa-z']", re.IGNORECASE)


def _is_list_gap(gap: str) -> bool:
    """True if ``gap`` only joins two items of one list ("," "and" "or", one modifier, ...)."""
    tokens = _WORD.findall(gap.lower())
    free = 0
    for i, tok in enumerate(tokens):
        if tok in {",", "/", "&", "+"} or tok in _CONNECTORS:
            if free:  # a modifier must sit right before the next item
                return False
            continue
        if not tok[0].isalpha() or tok in _STOP or tok in _BREAK_WORDS or _TRIGGER.fullmatch(tok):
            return False
        free += 1
        if free > 1:
            return False
    return True


def _triggers(text: str, mentions: list[tuple[int, int, str | None]]) -> list[int]:
    """End offsets of the negation cues in ``text`` (see module docstring)."""
    ends = [m.end() for m in _TRIGGER.finditer(text) if not _NOT_A_TRIGGER.match(text, m.start())]
    for m in _THAN.finditer(text):
        clause_start = max((c.end() for c in _CLAUSE_END.finditer(text, 0, m.start())
                            if c.group() != ","), default=0)
        before = text[clause_start:m.start()]
        if _PREFERENCE.search(before) and any(clause_start <= s < m.start() for s, _, _ in mentions):
            ends.append(m.end())
    return sorted(ends)


def _forward_negated(text: str, start: int, triggers: list[int], prev_end: int) -> bool:
    """A cue ends at most five words before ``start``, nothing blocking in between."""
    for t in triggers[bisect.bisect_left(triggers, prev_end): bisect.bisect_right(triggers, start)]:
        gap = text[t:start]
        words = re.findall(r"[a-z']+", gap.lower())
        if len(words) <= 5 and not _CLAUSE_END.search(gap) and not _BREAK_WORDS & set(words):
            return True
    return False


def extract(text: str, lexicon: Lexicon) -> list[str]:
    """Canonical labels of ``lexicon`` explicitly and affirmatively mentioned in ``text``.

    See the module docstring for the rules. Deduplicated, in order of first appearance.
    """
    if not text:
        return []
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    mentions = lexicon.mentions(text)
    if not mentions:
        return []
    triggers = _triggers(text, mentions)

    # group mentions into coordinated lists
    groups: list[list[tuple[int, int, str | None]]] = []
    for m in mentions:
        if groups and _is_list_gap(text[groups[-1][-1][1]:m[0]]):
            groups[-1].append(m)
        else:
            groups.append([m])

    kept: list[str] = []
    prev_end = 0
    for group in groups:
        first_start, last_end = group[0][0], group[-1][1]
        negated = _forward_negated(text, first_start, triggers, prev_end) or bool(
            _POST_NEGATION.match(text, last_end)
        )
        prev_end = last_end
        if negated:
            continue
        for start, end, label in group:
            if label is None or _LIKE_SUFFIX.match(text, end):
                continue
            if label not in kept:
                kept.append(label)
    return kept
