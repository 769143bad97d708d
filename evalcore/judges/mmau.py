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

Two verdicts per response (:class:`~evalcore.judges.base.PublishedRule`): ``credited`` is the published one —
every option the rule matches, so the response counts right exactly when the released ``string_match(answer,
response, choices)`` says True — and the default figure (``accuracy``); ``parsed_index`` is evalcore's strict
reading, the one option named, and the ``accuracy_strict`` figure. They differ only where the rule's quirks
credit a response without it naming one option (counted, never guessed, in the strict figure):

* **The same-words rule.** Two options with the same word set ("From far to near" / "From near to far") both
  match a response naming either ("From near to far", even "not from far to near"): the published scorer counts
  it right whichever of the two is the answer. The strict reading counts it **unanswered** (``parsed_index`` -1).
* **The wordless-choice rule.** An option without any word ("♯", "🎸": the loaders keep a choice of symbols
  only) is matched by every response with a word that holds no word of another option ("I do not know"): the
  published scorer credits it; the strict reading never names it. MMAR's released blank choices ``""`` are left
  out of the options by its loader: as choices without words that are never the answer, they change no verdict.
"""

from __future__ import annotations

import re
from typing import Sequence

from evalcore.judges.base import JUDGES, PublishedRule
from evalcore.judges.parser import ParserJudge

__all__ = ["words", "matches", "parse_mmau", "credit_mmau", "McqMmauJudge", "RULE"]

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


def credit_mmau(text: str, options: Sequence[str]) -> list[int]:
    """The published verdict: every option ``text`` matches by the MMAU rule (the response is right when the
    answer is one of them), options without words and options with the same words included."""
    return [i for i, o in enumerate(options) if matches(o, text, options)]


def parse_mmau(text: str, options: Sequence[str]) -> int:
    """The strict reading: index of the one option ``text`` matches by the MMAU rule; -1 when none does, when
    several do (options with the same words) or when the only match is an option without words."""
    hits = [i for i, o in enumerate(options) if words(o) and matches(o, text, options)]
    return hits[0] if len(hits) == 1 else -1


#: MMAU's published rule and where the strict reading departs from it
RULE = PublishedRule(
    source="github.com/Sakshi113/MMAU evaluation.py string_match @ 110127f5",
    quirks="the same-words or wordless-choice rule",
    strict="a response matching two options with the same words, or only an option without words, is unanswered")


@JUDGES.register("mcq_mmau")
class McqMmauJudge(ParserJudge):
    """MCQ judge: MMAU's published word-set match — its verdict (:func:`credit_mmau`) and evalcore's strict reading
    of it (:func:`parse_mmau`)."""

    version = "2"  # 2: the published verdict (credited) beside the strict one
    rule = RULE
    parse = staticmethod(parse_mmau)

    def credit(self, text: str, options: Sequence[str], parsed: int) -> list[int]:
        """Every option the word-set rule matches (:func:`credit_mmau`)."""
        return credit_mmau(text, options)
