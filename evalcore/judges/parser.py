"""The judge of every MCQ parser: a function ``(text, options) -> index`` (-1: unanswered) made a :class:`Judge
<evalcore.judges.base.Judge>`.

The MCQ judges of the released benchmarks (``mcq_string``, ``mcq_muchomusic``, ``mcq_rul``, ``mcq_mmau``,
``mcq_mmar``, ``mcq_mmau_pro``) differ only in their parser; the loop over responses, and what a missing
response or option list is (a failed request, not an unanswered question), is written once here.
"""

from __future__ import annotations

from typing import Callable, Sequence

from evalcore.judges.base import JudgeBase, Judgment

__all__ = ["ParserJudge"]


class ParserJudge(JudgeBase):
    """An MCQ judge around a parser ``(text, options) -> index``; subclasses set ``parse`` (a static function, or
    a method where the parser holds state, e.g. an embedding model)."""

    parse: Callable[[str, Sequence[str]], int]

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One ``{"parsed_index": i}`` per text (-1 = unanswered); ``tasks`` and ``questions`` are not read.

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
                out.append({"parsed_index": self.parse(text, opts)})
        return out
