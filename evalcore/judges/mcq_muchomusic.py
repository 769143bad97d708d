"""The MuChoMusic answer parser, bit-compatible with the benchmark's published scorer.

The rule (issue 6, and the MuChoMusic paper's "output-based" evaluation):

1. Keep the text after the **last** occurrence of ``"The correct answer is:"`` (case-sensitive,
   with the colon); without it the whole output. Surrounding whitespace is dropped.
2. If exactly one **distinct** character of ``A``, ``B``, ``C``, ``D`` occurs *anywhere* in
   that text, it is the answer (``A`` → 0, …, ``D`` → 3).
3. Otherwise the first option, in presented order, whose lowercased, stripped text is a
   substring of the lowercased text is the answer.
4. Otherwise unanswered (-1).

Quirks, kept on purpose (they are what "bit-compatible" means), so do not "fix" them here —
the ``strict`` parser (:mod:`evalcore.judges.mcq_string`) is the careful one:

* Only **capital** A–D count, and they count anywhere: the article in "A guitar plays" names
  option A, so does "Adele"; "Dorian" names D; "Calm" names C; "(b)" names nothing
  (lowercase); "Answer: C" holds two letters (A and C) and falls through to the text match.
* Repeats of one letter are one letter ("B. B is right" → B); two different capitals ("A
  piano … answer B") fall through to the text match, which may still pick an option.
* The letter set is always A–D, whatever the number of options: with three options a lone
  "D" gives 3, an index past the options (the published scorer counts it as answered and
  wrong). Letters E–Z are ignored.
* Text matching is plain substring containment in presented order, not whole words and not
  "exactly one": "pop" matches "popular", and a refusal quoting an option ("I can't tell if
  it is major or minor") picks the first option quoted in presented order. An option that
  is empty after stripping matches every output.
* The prefix is matched case-sensitively, so "the correct answer is: B" keeps the whole text.

evalcore reads this rule with no departure, so its two verdicts (:class:`~evalcore.judges.base.PublishedRule`)
agree on every response: ``credited`` is the option read, and ``accuracy_strict`` equals ``accuracy``
(``verdicts_differ`` 0). The careful reading of the same responses is another rule, ``mcq_string`` (run it as an
``agreement_judge``), not a strict figure of this one.
"""

from __future__ import annotations

from typing import Sequence

from evalcore.judges.base import JUDGES, PublishedRule
from evalcore.judges.parser import ParserJudge

__all__ = ["PREFIX", "LETTERS", "parse_muchomusic", "McqMuchomusicJudge", "RULE"]

PREFIX = "The correct answer is:"
LETTERS = "ABCD"


def parse_muchomusic(text: str, options: Sequence[str]) -> int:
    """Index of the answer in ``text`` by the MuChoMusic rule (module docstring); -1 = unanswered."""
    tail = text.rsplit(PREFIX, 1)[-1].strip()
    seen = {ch for ch in tail if ch in LETTERS}
    if len(seen) == 1:
        return LETTERS.index(seen.pop())
    low = tail.lower()
    return next((i for i, opt in enumerate(options) if opt.strip().lower() in low), -1)


#: MuChoMusic's output-based answer parsing (read with no departure: the strict reading is the same)
RULE = PublishedRule(source="github.com/mulab-mir/muchomusic output-based evaluation (the released answer parsing)",
                     quirks="none (evalcore reads the parser as released)")


@JUDGES.register("mcq_muchomusic")
class McqMuchomusicJudge(ParserJudge):
    """MCQ judge: the option index chosen in each response by :func:`parse_muchomusic`."""

    version = "2"  # 2: the published verdict (credited) beside the strict one
    rule = RULE
    parse = staticmethod(parse_muchomusic)
