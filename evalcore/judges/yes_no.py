"""Strict readers of true/false and binary-choice answers (paper App. B.2), and their judges.

Both readers return "unanswered" rather than guess: nothing is ever filled in at random.

**True/false** (:func:`read_yes_no`, judge ``true_false``) — "Is {label} used in this song?":

1. An empty answer, or one containing a **hedge** (:data:`HEDGES`: "maybe", "possibly",
   "probably", "might", "could be", "not sure", "hard to tell", "I don't know", ...) → unanswered.
2. A **leading answer word** decides: yes / yeah / yep / true / correct / "I think so" /
   "definitely" → yes; no / nope / not / false / incorrect / "I don't think so" /
   "definitely not" → no ("No doubt, …" is not a no).
3. **Both**: "yes and no", or a sentence that is a bare answer word ("No.", "Yes, …") opposite to
   the leading one → unanswered. A bare answer word in a later sentence answers ("The piano? Yes.").
4. Without a leading answer word, the asked label (the request's single option) decides when the
   answer names it: affirmatively ("A piano is clearly used") → yes; only negated ("There is no
   piano", "more like a viola than a violin" asked about violin) → no — read with the closed-
   vocabulary lexicon extractor (:func:`evalcore.vocab.extract.extract`), so synonyms, plurals
   and negation follow its rules. An answer that names neither (e.g. other instruments only) is
   unanswered.

**Binary choice** (:func:`read_choice`, judge ``binary_choice``) — "Between A and B, …":

1. Empty answer or a hedge (as above) → unanswered.
2. An opening echo of the question ("Between A and B, …") is dropped; then the two presented
   labels are extracted with the lexicon extractor restricted to them (synonyms,
   negation, comparatives: "rock rather than pop" → rock, "not pop; rock" → rock).
3. Exactly one label affirmed → that label. **Both** affirmed ("both", "rock and pop") or
   **neither** ("neither", "it's jazz", "not rock") → unanswered: a rejected label never implies
   the other one.
4. With no label named, "the first/former" or "the second/latter" picks by position in the question.

The judge also returns the **labels named** in the answer (:func:`named_labels`): the two presented
labels extracted as above but without the one-label rule (a hedge does not hide a mention, both
affirmed gives both, the position words name nothing), which the binary-choice scorer compares with
the ground truth by P/R/F1 as the paper does (:mod:`evalcore.scorers.factual_formats`).

The lexicon is chosen from the labels (``vocabulary="auto"``: the first built-in lexicon whose
vocabulary holds them; a label outside every lexicon is matched by its own name), or named.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

from evalcore.judges.base import JUDGES, JudgeBase, Judgment
from evalcore.vocab.extract import extract
from evalcore.vocab.lexicon import LEXICONS, Lexicon, VocabularyName, restrict

__all__ = ["HEDGES", "read_yes_no", "read_choice", "named_labels", "lexicon_for", "TrueFalseJudge", "BinaryChoiceJudge"]

#: a hedge anywhere in an answer makes it unanswered
HEDGES = re.compile(
    r"\b(?:maybe|perhaps|possibly|possible|probably|probable|likely|unlikely|might|could\s+(?:be|have|also)"
    r"|not\s+(?:sure|certain|clear)|unsure|uncertain|unclear|hard\s+to\s+(?:say|tell)"
    r"|difficult\s+to\s+(?:say|tell|determine)|(?:can't|cannot|can\s+not|couldn't)\s+(?:tell|say|determine|be\s+sure)"
    r"|(?:don't|do\s+not)\s+know|it\s+depends|either)\b",
    re.IGNORECASE,
)
_PREFIX = r"^[\s\"'*`>#\-]*(?:(?:the\s+)?answer\s*(?:is)?\s*[:\-]?\s*)?[\s\"'*`]*"
_NO = re.compile(
    _PREFIX + r"(?:(?:definitely|absolutely|certainly|of\s+course)\s+not|i\s+(?:don't|do\s+not)\s+think\s+so"
    r"|no(?!\s+(?:doubt|question|matter)\b)|nope|nah|not|false|incorrect|negative)\b",
    re.IGNORECASE,
)
_YES = re.compile(
    _PREFIX + r"(?:yes|yeah|yep|yup|true|correct|affirmative|i\s+think\s+so|indeed"
    r"|(?:definitely|absolutely|certainly|of\s+course)(?!\s+not)(?=\s*[,.!;:]|\s*$))\b",
    re.IGNORECASE,
)
_BOTH = re.compile(r"\byes\s+(?:and|or)\s+no\b|\bno\s+(?:and|or)\s+yes\b", re.IGNORECASE)
#: a sentence that is just an answer word ("No." / "Yes, …"), used to detect answers both ways
_BARE = re.compile(r"^[\s\"'*`]*(yes|yeah|yep|yup|true|no|nope|false)\s*(?:[,.!;:]|$)", re.IGNORECASE)
_YES_WORDS = {"yes", "yeah", "yep", "yup", "true"}
_SENTENCE = re.compile(r"(?<=[.!?;\n])\s*")
_FIRST = re.compile(r"\b(?:the\s+)?(?:first|former)(?:\s+(?:one|option|label))?\b", re.IGNORECASE)
_SECOND = re.compile(r"\b(?:the\s+)?(?:second|latter)(?:\s+(?:one|option|label))?\b", re.IGNORECASE)
#: an echo of the question ("Between A and B, …") that opens an answer
_ECHO = re.compile(r"^\W*between\b[^,:;.!?\n]*[,:;.!?\n]", re.IGNORECASE)
_AUTO_ORDER = ("musicnet_instrument", "genre", "composer", "instrument")


def _clean(text: str | None) -> str:
    return (text or "").replace("\u2019", "'").replace("\u2018", "'").strip()


def _lead(sentence: str) -> bool | None:
    """The answer word a sentence starts with: True (yes), False (no) or None."""
    if _NO.match(sentence):
        return False
    if _YES.match(sentence):
        return True
    return None


@lru_cache(maxsize=512)
def lexicon_for(labels: tuple[str, ...], vocabulary: str = "auto") -> Lexicon:
    """A lexicon whose vocabulary is exactly ``labels``: a built-in lexicon (named, or the first
    holding all of them for ``"auto"``) restricted to them, else the labels as their own forms."""
    names = [vocabulary] if vocabulary != "auto" else [n for n in _AUTO_ORDER if set(labels) <= set(LEXICONS[n].labels)]
    if vocabulary != "auto" and vocabulary not in LEXICONS:
        raise KeyError(f"unknown vocabulary {vocabulary!r}; known: auto, {', '.join(sorted(LEXICONS))}")
    if names:
        return restrict(LEXICONS[names[0]], list(labels), name=f"{names[0]}:{'|'.join(labels)}")
    return Lexicon(synonyms={lab: [] for lab in labels}, name="labels")


def read_yes_no(text: str | None, label: str | None = None, vocabulary: str = "auto") -> bool | None:
    """True (yes), False (no) or None (unanswered) for a true/false answer; see the module docstring."""
    t = _clean(text)
    if not t or HEDGES.search(t) or _BOTH.search(t):
        return None
    first = _lead(t)
    bare = {m.group(1).lower() in _YES_WORDS for s in _SENTENCE.split(t) if (m := _BARE.match(s))}
    if len(bare) > 1 or (first is not None and bare and bare != {first}):
        return None  # sentences answering both ways
    if first is not None:
        return first
    if bare:  # a bare answer word later ("The piano? Yes.")
        return bare.pop()
    if not label:
        return None
    lexicon = lexicon_for((label,), vocabulary)
    if not any(lab == label for _, _, lab in lexicon.mentions(t)):
        return None
    return label in extract(t, lexicon)


def named_labels(text: str | None, options: Sequence[str], vocabulary: str = "auto") -> list[str]:
    """The presented labels an answer names affirmatively (echo of the question dropped), in order."""
    t = _clean(text)
    if len(options) != 2 or not t:
        return []
    return extract(_ECHO.sub("", t, count=1), lexicon_for(tuple(options), vocabulary))


def read_choice(text: str | None, options: Sequence[str], vocabulary: str = "auto") -> int:
    """Index of the chosen option (0/1) of a binary-choice answer, or -1 (unanswered)."""
    t = _clean(text)
    if len(options) != 2 or not t or HEDGES.search(t):
        return -1
    t = _ECHO.sub("", t, count=1)
    found = extract(t, lexicon_for(tuple(options), vocabulary))
    if len(found) == 1:
        return list(options).index(found[0])
    if found or any(lab is not None for _, _, lab in lexicon_for(tuple(options), vocabulary).mentions(t)):
        return -1  # both affirmed, or named but rejected: never implies the other option
    first, second = bool(_FIRST.search(t)), bool(_SECOND.search(t))
    return 0 if first and not second else 1 if second and not first else -1


class _Reader(JudgeBase):
    """The two judges' constructor and loop over responses; each reads one response (:meth:`read`) and names the
    field a missing response leaves empty (``answer_field``)."""

    answer_field: str

    def __init__(self, vocabulary: VocabularyName = "auto") -> None:
        if vocabulary != "auto" and vocabulary not in LEXICONS:
            raise KeyError(f"unknown vocabulary {vocabulary!r}; known: auto, {', '.join(sorted(LEXICONS))}")
        self.vocabulary = vocabulary

    def read(self, text: str, options: list[str] | None) -> Judgment:
        raise NotImplementedError

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One judgment per text (:meth:`read`); a missing response is a failed request, not an unanswered one."""
        if len(texts) != len(options):
            raise ValueError(f"{len(texts)} texts but {len(options)} option lists")
        return [{self.answer_field: None, "error": "no response"} if text is None else self.read(text, opts)
                for text, opts in zip(texts, options)]


@JUDGES.register("true_false")
class TrueFalseJudge(_Reader):
    """True/false judge: ``{"extracted": ["yes"] | ["no"] | []}`` (``[]`` = unanswered).

    ``options`` holds the asked label (one string) when known; without it only answer words count.
    """

    answer_field = "extracted"

    def read(self, text: str, options: list[str] | None) -> Judgment:
        answer = read_yes_no(text, options[0] if options else None, self.vocabulary)
        return {"extracted": [] if answer is None else ["yes" if answer else "no"]}


@JUDGES.register("binary_choice")
class BinaryChoiceJudge(_Reader):
    """Binary-choice judge: ``{"parsed_index": 0 | 1 | -1, "extracted": [labels named]}`` (-1 = unanswered)
    over the two options."""

    version = "2"
    answer_field = "parsed_index"

    def read(self, text: str, options: list[str] | None) -> Judgment:
        if not options or len(options) != 2:
            return {"parsed_index": None, "error": f"binary choice needs 2 options, got {len(options or [])}"}
        return {"parsed_index": read_choice(text, options, self.vocabulary),
                "extracted": named_labels(text, options, self.vocabulary)}
