"""The judge of every MCQ parser: a function ``(text, options) -> index`` (-1: unanswered) made a :class:`Judge
<evalcore.judges.base.Judge>`.

The MCQ judges of the released benchmarks (``mcq_string``, ``mcq_muchomusic``, ``mcq_rul``, ``mcq_mmau``,
``mcq_mmar``, ``mcq_mmau_pro``) differ only in their parser; the loop over responses, and what a missing
response or option list is (a failed request, not an unanswered question), is written once here.

A judge that follows a published rule (``rule``, :class:`~evalcore.judges.base.PublishedRule`) also says which
options the released scorer credits (:meth:`ParserJudge.credit`): by default the option its parser names, for the
rules evalcore reads with no departure (RUListening's, MuChoMusic's); MMAU's word-set rule and MMAU-Pro's nearest
choice say otherwise where their quirks credit what the strict reading does not.
"""

from __future__ import annotations

from typing import Callable, Sequence

from evalcore.judges.base import JudgeBase, Judgment

__all__ = ["ParserJudge", "named"]


def named(index: int) -> list[int]:
    """The options credited when a rule credits exactly the option it names: ``[index]``, none for -1."""
    return [index] if index >= 0 else []


class ParserJudge(JudgeBase):
    """An MCQ judge around a parser ``(text, options) -> index``; subclasses set ``parse`` (a static function, or
    a method where the parser holds state, e.g. an embedding model)."""

    parse: Callable[[str, Sequence[str]], int]

    def credit(self, text: str, options: Sequence[str], parsed: int) -> list[int]:
        """The options the published rule credits for ``text`` (``parsed``: what :attr:`parse` named); by default
        the named option (a rule evalcore reads with no departure)."""
        return named(parsed)

    def read(self, text: str, options: Sequence[str]) -> Judgment:
        """One response's judgment: the strict ``parsed_index`` and, under a published rule, ``credited``."""
        parsed = self.parse(text, options)
        if self.rule is None:
            return {"parsed_index": parsed}
        return {"parsed_index": parsed, "credited": self.credit(text, options, parsed)}

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One judgment per text (:meth:`read`; -1 = unanswered); ``tasks`` and ``questions`` are not read.

        A missing response or option list is not an unanswered question but a failed
        request: ``{"parsed_index": None, "error": ...}``.
        """
        if len(texts) != len(options):
            raise ValueError(f"{len(texts)} texts but {len(options)} option lists")
        out: list[Judgment] = []
        for text, opts in zip(texts, options):
            if text is None:
                out.append({"parsed_index": None, "error": "no response"})
            elif not opts:
                out.append({"parsed_index": None, "error": "no options"})
            else:
                out.append(self.read(text, opts))
        return out
