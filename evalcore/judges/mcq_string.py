"""Strict string parser for multiple-choice answers (the MCQ protocol's judge).

Follows MuChoMusic's output-based evaluation: the answer is mapped to an option by its
identifier (letter) or by the full option text "if one and only one is given in the
output". Anything else is *unanswered* (-1); there is never a random fallback.
"""

from __future__ import annotations

import re
from typing import Sequence

from evalcore.judges.base import JUDGES
from evalcore.judges.parser import ParserJudge

__all__ = ["parse_choice", "McqStringJudge"]

# a lone letter: not part of a word, a contraction ("it's") or a number
_LETTER = re.compile(r"(?<![A-Za-z0-9'\u2019])([A-Za-z])(?![A-Za-z0-9'\u2019])")
# cues after which a lone letter names an option
_STRONG_CUE = re.compile(r"\b(?:option|choice|letter)\s*[:#]?\s*$", re.IGNORECASE)
_WEAK_CUE = re.compile(
    r"(?:\b(?:answer|is|be|choose|chose|select|selected|pick|picked|with"
    r"|probably|maybe|perhaps|possibly|likely|definitely|certainly|clearly|surely|obviously"
    r"|guess|think|say|but|also)|'s)\s*[:=\-]?\s*$",
    re.IGNORECASE,
)
# a letter in single quotes, 'B' (the lone-letter pattern never matches after an apostrophe)
_SINGLE_QUOTED = re.compile(r"(?<![A-Za-z0-9])'([A-Za-z])'(?![A-Za-z0-9])")
_LINE_START = re.compile(r"[ \t]*(?:[-\u2022>][ \t]*)?")
# what may follow a bare letter for it to be a label rather than a word ("A guitar ...")
_TERMINATOR = re.compile(
    r"\s*(?:$|[.):,;!?\]\-\u2013\u2014\n]|(?:because|since|as|is|was|would|which|fits|seems"
    r"|best|correct)\b)",
    re.IGNORECASE,
)
# two letters joined: "B or C", "A, B", "A and C", "B/C" -> the answer hedges
_LETTER_PAIR = re.compile(
    r"(?<![A-Za-z0-9'])\(?([A-Z])\)?\s*(?:,|/|\bor\b|\band\b)\s*\(?([A-Z])\)?(?![A-Za-z0-9'])"
)
_REFUSAL = re.compile(
    r"\b(?:can(?:no|')t|could(?:n't| not)|unable to|impossible to|hard to|difficult to)\s+"
    r"(?:tell|determine|say|decide|identify|know|answer)"
    r"|\b(?:not sure|uncertain|don't know|do not know|no way to)\b",
    re.IGNORECASE,
)
# a letter explicitly rejected: "(A) is incorrect", "not B", "rule out C"
_REJECTED_AFTER = re.compile(
    r"[)\]\"']?\s*(?:is|are|seems|would be)?\s*(?:incorrect|wrong|unlikely|not\b|ruled out|can be ruled out)",
    re.IGNORECASE,
)
_REJECTED_BEFORE = re.compile(
    r"(?:\bnot|n't|\brule out|\bruling out|\beliminate|\bunlike|\bexclude)\s*(?:option|choice)?\s*[(\[\"']?$",
    re.IGNORECASE,
)
# a note name, not an option: "B-flat", "C#", "E♭"
_NOTE_NAME = re.compile(r"\s?-?\s?(?:flat|sharp)\b|[#\u266d\u266f]", re.IGNORECASE)
# lowercase letters that are English words (article, pronoun): never an option without enclosure or cue
_WORDS = ("a", "i")
_NEGATED_BEFORE = re.compile(r"(?:\bnot|n't|\bno)\s+(?:(?:a|an|the)\s+)?$", re.IGNORECASE)


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def _letters(text: str, options: Sequence[str]) -> set[int]:
    """Indices of all options named by a letter in ``text`` (see :func:`parse_choice`)."""
    n = len(options)
    found: set[int] = set()
    for a, b in _LETTER_PAIR.findall(text):
        idx = {ord(a) - 65, ord(b) - 65}
        if a != b and all(0 <= i < n for i in idx):
            found |= idx
    for m in _SINGLE_QUOTED.finditer(text):
        idx = ord(m.group(1).upper()) - 65
        after = text[m.end(): m.end() + 40]
        if 0 <= idx < n and not _REJECTED_AFTER.match(after) and not _REJECTED_BEFORE.search(
                text[max(0, m.start() - 40): m.start()]):
            found.add(idx)
    for m in _LETTER.finditer(text):
        ch = m.group(1)
        idx = ord(ch.upper()) - 65
        if not 0 <= idx < n:
            continue
        option = _norm(options[idx]).rstrip(".")
        before = text[max(0, m.start() - 40): m.start()]
        after = text[m.end(): m.end() + len(option) + 40]
        if _REJECTED_AFTER.match(after) or _REJECTED_BEFORE.search(before) or _NOTE_NAME.match(after):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        at_line_start = _LINE_START.fullmatch(text, line_start, m.start()) is not None
        prev = before[-1:]
        nxt = after[:1]
        if (prev, nxt) in {("(", ")"), ("[", "]"), ('"', '"'), ("'", "'")} or (
            nxt == ")" and prev != "("
        ):
            found.add(idx)  # enclosed "(B)" "[B]" "'B'" or list-style "B)"
            continue
        terminated = bool(_TERMINATOR.match(text, m.end())) or (
            bool(option) and re.match(rf"\s*{re.escape(option)}(?!\w)", _norm(after)) is not None
        )
        if _STRONG_CUE.search(before) and (ch.isupper() or terminated):
            found.add(idx)
        elif ch in _WORDS:
            continue  # the article "a" or the pronoun "i": a letter only enclosed or after a strong cue
        elif (_WEAK_CUE.search(before) or at_line_start) and terminated:
            found.add(idx)
    return found


def _option_texts(text: str, options: Sequence[str]) -> set[int]:
    """Indices of options whose full text occurs (whole phrase, not negated) in ``text``."""
    low = _norm(text)
    order = sorted(range(len(options)), key=lambda i: -len(_norm(options[i])))
    covered = bytearray(len(low))  # 1 = inside an occurrence of a (longer) option
    found: set[int] = set()
    for i in order:
        opt = _norm(options[i]).rstrip(".")
        if not opt:
            continue
        for m in re.finditer(rf"(?<!\w){re.escape(opt)}(?!\w)", low):
            s, e = m.span()
            if 0 not in covered[s:e]:
                continue  # inside a longer option's match ("rock" in "folk rock")
            covered[s:e] = b"\x01" * (e - s)
            if not _NEGATED_BEFORE.search(low[max(0, s - 20): s]):
                found.add(i)
        if len(found) > 1:
            break  # ambiguous already
    return found


def parse_choice(text: str, options: Sequence[str]) -> int:
    """0-based index of the option chosen in ``text``; -1 when unanswered or ambiguous.

    Markdown emphasis (``*``, ``_``, backticks) is removed first. Then, for the letters
    ``A`` .. ``A+len(options)-1`` only (a letter out of range names nothing):

    1. **Letters.** A lone letter (not part of a word or contraction) names an option when it is

       * enclosed — ``(B)``, ``[B]``, ``"B"``, ``'B'`` — or list-style ``B)``, anywhere in the
         text; or
       * after a *strong cue* (``option``, ``choice``, ``letter``): ``Option B``; lowercase
         letters there need a terminator (below); or
       * at the start of a line, or after a *weak cue* (``answer``, ``answer is``, ``answer:``,
         ``is``, ``'s``, ``be``, ``choose``, ``select``, ``pick``, ``go with``, and the hedging or
         confident adverbs and verbs ``probably/maybe/perhaps/possibly/likely/definitely/
         certainly/clearly/surely/obviously/guess/think/say``) **and**
         followed by a terminator: the end of the text, punctuation (``. ) : , ; ! ? ] -``), one of
         ``because/since/as/is/was/would/which/fits/seems/best/correct``, or that letter's own
         option text ("B major" when option B is "major").

       A lowercase ``a`` or ``i`` (the English article and pronoun) names an option only enclosed or
       after a strong cue: "a" alone (an answer cut after its first word) names nothing.
       So "A guitar plays ..." names nothing (the article is followed by a word that is not
       option A's text), while "B", "(B)", "B.", "**B**", "Answer: B", "The correct answer
       is B", "the answer is (B)", "Option B" and "B) major" all name B. Two different
       letters joined by ``or``/``and``/``,``/``/`` ("B or C", "(A) or (B)") both count, and so
       do the two letters of a hedge ("Probably B, though it could also be C." → -1).
       A letter explicitly rejected is skipped: followed by "is incorrect/wrong/unlikely/not"
       or "ruled out", or preceded by "not", "rule out", "eliminate", "unlike" ("The
       answer is (B); (A) is incorrect" → B), and so is a note name ("B-flat", "C#"). If exactly
       one option is named by letters it
       is the answer; if several, -1.
    2. **Option text**, only when no letter names an option and the text holds no refusal
       ("can't tell", "unable to determine", "not sure", "don't know", ...): the options
       whose full text occurs case-insensitively as a whole phrase (whitespace-normalised,
       a final period ignored) and is not directly negated ("not major"). An occurrence
       inside a longer option's occurrence does not count ("rock" inside "folk rock"). If
       exactly one option occurs it is the answer; otherwise -1 ("I cannot tell whether it
       is major or minor" → -1).
    """
    if not text or not options:
        return -1
    text = re.sub(r"[*_`]+", "", text).replace("\u2019", "'")
    named = _letters(text, options)
    if named:
        return named.pop() if len(named) == 1 else -1
    if _REFUSAL.search(text):
        return -1
    found = _option_texts(text, options)
    return found.pop() if len(found) == 1 else -1


@JUDGES.register("mcq_string")
class McqStringJudge(ParserJudge):
    """MCQ judge: the option chosen in each response by :func:`parse_choice`."""

    parse = staticmethod(parse_choice)
