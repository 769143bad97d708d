"""CMI-Bench's lyrics rule (``compute_wer_cer`` / ``batch_wer_cer`` of the released ``evaluate.py``, commit 4c15f410):
DSing lyrics transcription, scored by ``jiwer.wer`` and ``jiwer.cer`` per item, then **averaged over items** (the
released figure is the mean of per-line WERs, not a corpus WER pooled over words).

The released cleaning (:func:`clean_prediction`, :func:`clean`):

1. The response only: each of these patterns, in turn, is replaced by nothing wherever it matches (``.`` does not
   cross a newline), then the text is stripped: ``.*? lyrics .*?are.*?:``, ``.*? content .*?is.*?:``,
   ``.*? transcription .*?is.*?:``, ``.*? text .*?is.*?:``, ``<s>``, ``</s>`` ("The lyrics of the song are: …" →
   "…"; SALMONN's ``<s>`` tags). evalcore removes them in linear time (:func:`_strip_prefix`): the released
   patterns backtrack, quadratic in a line's length (a 10-KB answer cost 11 s); the test holds the two to the same
   text on every generated answer.
2. Response and reference alike: every ASCII punctuation character **but the apostrophe** is deleted, then lower
   case, newlines become spaces, and each whitespace-separated word made only of digits is spelled out with
   ``num2words`` ("3" → "three", "21" → "twenty-one" — the hyphen comes back after the deletion).

``wer`` and ``cer`` are ``jiwer.wer(reference, prediction)`` and ``jiwer.cer(…)`` of the cleaned texts.
``word_accuracy`` (evalcore's addition, 1 − WER per item, averaged) is the same figure turned higher-is-better for
the listening verdict; it is negative where WER exceeds 1 (a hallucinated song for one sung line).

Where the released scorer stops (counted, never guessed): a "word" of Unicode digits ``int()`` cannot read
("²") — the released code fails inside ``num2words``; a number num2words cannot spell (10²⁷ and above:
``OverflowError``; more than 4,300 digits: ``int()`` refuses); ``jiwer`` refusing a pair. Such requests are error rows.
"""

from __future__ import annotations

import re
import string
from importlib.metadata import version
from typing import Any, Mapping

from evalcore.datasets.cmi_bench import Family
from evalcore.mir_rules.rules import RULES, PublishedStops, Rule, reference_of
from evalcore.stats.aggregate import Aggregate, mean_of

__all__ = ["PREFIXES", "clean_prediction", "clean_prediction_released", "clean", "LyricsRule"]

#: the released prefix patterns, removed from the response in this order
PREFIXES = (r".*? lyrics .*?are.*?:", r".*? content .*?is.*?:", r".*? transcription .*?is.*?:",
            r".*? text .*?is.*?:", "<s>", "</s>")
_VERSIONS = {"jiwer": version("jiwer"), "num2words": version("num2words")}
_DELETE = str.maketrans("", "", string.punctuation.replace("'", ""))


#: the released prefix patterns as (word, verb): ``.*? <word> .*?<verb>.*?:``
_PREFIX_WORDS = (("lyrics", "are"), ("content", "is"), ("transcription", "is"), ("text", "is"))


def _strip_prefix(text: str, word: str, verb: str) -> str:
    """``re.sub(rf".*? {word} .*?{verb}.*?:", "", text)`` in linear time.

    From a position p, the released pattern matches (within p's line: ``.`` does not cross a newline) exactly when
    the line holds, at or after p, `` word `` at L, then ``verb`` at or after L + len(word) + 2, then ``:`` after
    it; the lazy quantifiers make the match end at the first such ``:`` after the first such ``verb`` after the
    first such L. Where it fails from p it fails from every later p of the line (fewer candidates), so the rest of
    the line is kept: each character is scanned a bounded number of times."""
    out: list[str] = []
    p, n, eol = 0, len(text), -1
    needle = f" {word} "
    while p < n:
        if eol < p:
            eol = text.find("\n", p)
            eol = n if eol == -1 else eol
        at = text.find(needle, p, eol)
        if at != -1:
            verb_at = text.find(verb, at + len(needle), eol)
            if verb_at != -1:
                colon = text.find(":", verb_at + len(verb), eol)
                if colon != -1:
                    p = colon + 1  # text[p:colon + 1] is the match: removed
                    continue
        out.append(text[p:eol + 1])  # no match from p (nor later in its line): kept, with its newline
        p = eol + 1
    return "".join(out)


def clean_prediction(text: str) -> str:
    """Step 1 of the released cleaning: the prefix patterns (:data:`PREFIXES`) removed from a response, in order,
    each followed by a strip — in linear time (:func:`_strip_prefix`)."""
    for word, verb in _PREFIX_WORDS:
        text = _strip_prefix(text, word, verb).strip()
    for tag in ("<s>", "</s>"):
        text = text.replace(tag, "").strip()
    return text


def clean_prediction_released(text: str) -> str:
    """Step 1 exactly as released (``re.sub`` of :data:`PREFIXES`): quadratic in a line's length; kept for the
    tests that hold :func:`clean_prediction` to it."""
    for pattern in PREFIXES:
        text = re.sub(pattern, "", text).strip()
    return text


def clean(text: str) -> str:
    """Step 2 of the released cleaning: punctuation but ``'`` deleted, lower case, digit words spelled out."""
    from num2words import num2words  # heavy: 0.2 s with jiwer; `evalcore --help` imports the metrics

    words = text.translate(_DELETE).lower().replace("\n", " ").split()
    for i, w in enumerate(words):
        if w.isdigit():
            try:
                words[i] = num2words(int(w))
            except ValueError:
                raise PublishedStops(f"the word {w[:20]!r} is digits int() cannot read: the released scorer stops "
                                     "there") from None
            except OverflowError:  # num2words spells numbers below 10**27 (English) and raises past them
                raise PublishedStops(f"the number {w[:20]}… ({len(w)} digits) is too large for num2words: the "
                                     "released scorer stops there") from None
    return " ".join(words)


@RULES.register(Family.LYRICS)
class LyricsRule(Rule):
    """Per-item WER and CER (jiwer) of the released cleaning of response and reference."""

    columns = ("word_accuracy", "wer", "cer")
    aggregates = (
        Aggregate("word_accuracy", ("word_accuracy",), mean_of(),
                  "1 − WER per item, averaged (higher is better; evalcore's listening twin of wer)"),
        Aggregate("wer", ("wer",), mean_of(),
                  f"CMI-Bench lyrics WER (evaluate.py batch_wer_cer @ 4c15f410): mean over items of jiwer.wer "
                  f"{_VERSIONS['jiwer']} after the released cleaning (prefixes, punctuation but ', lower case, "
                  f"digits spelled by num2words {_VERSIONS['num2words']}); lower is better"),
        Aggregate("cer", ("cer",), mean_of(), "mean over items of jiwer.cer after the same cleaning; lower is better"),
    )

    def score(self, response: str, reference: Any, meta: Mapping[str, Any]) -> dict[str, float]:
        import jiwer  # heavy: see clean()

        prediction = clean(clean_prediction(str(response)))
        truth = clean(str(reference_of(reference)))
        try:
            wer, cer = float(jiwer.wer(truth, prediction)), float(jiwer.cer(truth, prediction))
        except ValueError as e:
            raise PublishedStops(f"jiwer refuses the pair ({str(e)[:80]}): the released scorer stops there") from None
        return {"word_accuracy": 1.0 - wer, "wer": wer, "cer": cer}

    def versions(self) -> dict[str, str]:
        return dict(_VERSIONS)
