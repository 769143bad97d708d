"""RUListening's answer extraction (RUL-MuchoMusic), as its released evaluation scripts and dataset card apply it.

Source: github.com/yongyizang/AreYouReallyListening at d3971de, ``ExampleAudioEval/qwen_2_audio.py``
(``extract_answer``; the same function in the other three example scripts and on the Hugging Face card
``yongyizang/RUListening``). Restated here, in order; the first step that finds something decides:

1. **Bracketed letter**: the *last* ``[[X]]`` with ``X`` a capital ``A``–``E`` (the format the prompt asks
   for). Case-sensitive: ``[[b]]`` is not one.
2. **Cue phrase**: the last letter right after one of ``answer is``, ``chose``, ``choose``, ``select``,
   ``guess is``, ``I choose``, ``I select``, ``I guess`` and a single space, the letter ``A``–``E`` standing
   alone (a word boundary after it). The match ignores case — the letter's too, so "I choose a" names ``A``
   ("I choose a guitar" as well), and the letter is upper-cased.
3. **Named option**: the first letter, in the order ``A``, ``B``, ``C``, ``D``, ``E`` (not the order of
   appearance), for which ``option X``, ``Option X`` or ``(X)`` occurs anywhere as plain text ("option
   Alpha" holds ``option A``).
4. **Option text**: the first option, in presented order, whose text (lower-cased) is contained in the
   lower-cased response. An empty option is skipped.
5. Otherwise nothing is extracted: a **parse failure** (``-1``). There is no random fallback.

Letters run to ``E`` whatever the number of options (the released one-shot mode has five): with four
options an extracted ``E`` is index 4, past the options — answered and wrong, as the released scorer has
it (its ``letter_mapping`` has no ``E``, so the answer text is empty and ``is_correct`` false). The
released leave-one-out vote leaves such an answer out, like a parse failure
(:mod:`evalcore.scorers.perceptual_index`).

evalcore reads this rule with no departure, so its two verdicts (:class:`~evalcore.judges.base.PublishedRule`)
agree on every response: ``credited`` is the extracted option, and ``accuracy_strict`` equals ``accuracy``
(``verdicts_differ`` 0). The rule's quirks above are the published figure's; a careful reading of the same
responses is another rule (``mcq_string``, as an ``agreement_judge``), not a strict figure of this one.
"""

from __future__ import annotations

import re
from typing import Sequence

from evalcore.judges.base import JUDGES, PublishedRule
from evalcore.judges.parser import ParserJudge

__all__ = ["LETTERS", "parse_rul", "McqRulJudge", "RULE"]

LETTERS = "ABCDE"
_BRACKETED = re.compile(r"\[\[([A-E])\]\]")
_CUE = re.compile(r"(?:answer is|chose|choose|select|guess is|I choose|I select|I guess) ([A-E])\b", re.IGNORECASE)


def parse_rul(text: str, options: Sequence[str]) -> int:
    """Index of the answer in ``text`` by RUListening's extraction (module docstring); -1 = parse failure."""
    found = _BRACKETED.findall(text)
    if found:
        return LETTERS.index(found[-1])
    cued = _CUE.findall(text)
    if cued:
        return LETTERS.index(cued[-1].upper())
    for i, letter in enumerate(LETTERS):
        if f"option {letter}" in text or f"Option {letter}" in text or f"({letter})" in text:
            return i
    low = text.lower()
    return next((i for i, opt in enumerate(options) if opt and opt.lower() in low), -1)


#: RUListening's released extraction (read with no departure: the strict reading is the same)
RULE = PublishedRule(source="github.com/yongyizang/AreYouReallyListening ExampleAudioEval/qwen_2_audio.py "
                            "extract_answer @ d3971de",
                     quirks="none (evalcore reads the extraction as released)")


@JUDGES.register("mcq_rul")
class McqRulJudge(ParserJudge):
    """MCQ judge: the option index chosen in each response by :func:`parse_rul`."""

    version = "2"  # 2: the published verdict (credited) beside the strict one
    rule = RULE
    parse = staticmethod(parse_rul)
