"""The MMAU answer-matching rule (``string_match`` of the benchmark's ``evaluation.py``) as an MCQ judge.

Source: github.com/Sakshi113/MMAU, ``evaluation.py`` (commit 110127f5); MMAR's ``code/evaluation.py``
(github.com/ddlBoJack/MMAR, commit 3bce090a) states it is modified from MMAU's and keeps the same matching
function, so ``mcq_mmar`` (:mod:`evalcore.judges.mmar`) is this rule under MMAR's name.

The published rule decides whether a response matches **one** choice text (the answer); an option is the
judged answer when the rule, applied to that option as if it were the answer, holds:

1. Words are the lowercased ``\\w+`` runs between word boundaries, as sets: "Male speech." → {male, speech}.
2. An option *o* matches the response *r* when every word of *o* is a word of *r*, **and** *r* holds no word of
   any other choice that is not also a word of *o* (choices with exactly *o*'s word set are not "other").
3. A response without any word matches nothing.

Consequences the tests hold (they are the rule's, not evalcore's choices):

* **Letters do not count.** "B" or "(B)" alone matches no option (unless an option's only word is "b");
  "(B) Male speech" matches "Male speech" through its text. So a model answering with letters only scores
  zero under this rule, and the instruction-following rate shows it.
* **Any extra word from another option spoils the match**: "Male speech, not female speech" holds "female"
  (a word of "Female speech" not in "Male speech") and matches nothing; so does a hedge naming two options.
* **Word order and repetition do not count**: "speech male" matches "Male speech".
* **Shared words are free**: with "Male speech" / "Female speech", the word "speech" alone matches neither
  (neither option's words are all present).

Where evalcore cannot reproduce the published score exactly (counted, never guessed):

* Two options with the same word set ("From far to near" / "From near to far") both match a response naming
  either; the published scorer then counts the response right whichever of the two is the answer. A judge
  names one option, so evalcore counts such a response **unanswered** (``parsed_index`` -1) — never a guess.
* An option without any word would match every response naming no other option: the loaders drop blank choices
  (MMAR has choices ``""``) and keep a choice of symbols only ("♯", "🎸") as an option, which this judge never
  matches (a response choosing it is unanswered).
"""

from __future__ import annotations

import re
from typing import Sequence

from evalcore.judges.base import JUDGES
from evalcore.judges.parser import ParserJudge

__all__ = ["words", "matches", "parse_mmau", "McqMmauJudge"]

_WORD = re.compile(r"\b\w+\b")


def words(text: str) -> frozenset[str]:
    """The rule's words of ``text``: lowercased ``\\w+`` runs between word boundaries, as a set."""
    return frozenset(_WORD.findall(text.lower()))


def matches(answer: str, response: str, choices: Sequence[str]) -> bool:
    """Whether ``response`` matches the choice ``answer`` by the MMAU rule (module docstring)."""
    said, target = words(response), words(answer)
    if not said:
        return False
    others: set[str] = set()
    for choice in choices:
        w = words(choice)
        if w != target:
            others |= w - target
    return target <= said and said.isdisjoint(others)


def parse_mmau(text: str, options: Sequence[str]) -> int:
    """Index of the one option ``text`` matches by the MMAU rule; -1 when none does, when several do (options
    with the same words) or when the only match is an option without words."""
    hits = [i for i, o in enumerate(options) if words(o) and matches(o, text, options)]
    return hits[0] if len(hits) == 1 else -1


@JUDGES.register("mcq_mmau")
class McqMmauJudge(ParserJudge):
    """MCQ judge: the option chosen in each response by MMAU's published word-set match (:func:`parse_mmau`)."""

    parse = staticmethod(parse_mmau)
