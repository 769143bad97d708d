"""A toy judge, registered here and named nowhere else: the proof that a judge is one file plus its registration
(tests/test_judge_registry.py), and the file to copy for a new one (docs/judges.md). MCQ: the option whose letter
opens the response ("B) a violin" → 1); a response that opens with no option's letter is unanswered (-1).

A judge implements :class:`evalcore.judges.base.Judge`: a ``version`` (it goes into the ``judge`` column as
``name@version``), what it reads besides texts and options (``uses_tasks``, ``uses_questions``; :class:`JudgeBase`
says neither) and :meth:`judge`, one :class:`Judgment` per text. Its constructor's parameters are its ``params``
in the config, checked by ``evalcore validate`` (:mod:`evalcore.core.params`).
"""

from __future__ import annotations

import re
from typing import Sequence

from evalcore.judges.base import JUDGES, JudgeBase, Judgment

_OPENING = re.compile(r"\s*\(?([A-Za-z])[).:\s]")


@JUDGES.register("toy_first_letter")
class ToyFirstLetterJudge(JudgeBase):
    """``lowercase``: a lowercase letter ("b) …") names an option too."""

    version = "1"

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = lowercase

    def _index(self, text: str, options: Sequence[str]) -> int:
        m = _OPENING.match(text + " ")
        if m is None or (m.group(1).islower() and not self.lowercase):
            return -1
        idx = ord(m.group(1).upper()) - 65
        return idx if idx < len(options) else -1

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: Sequence[str | None] | None = None,
              questions: Sequence[str | None] | None = None) -> list[Judgment]:
        """One ``{"parsed_index": i}`` per text; a missing response or option list is a failed request."""
        if len(texts) != len(options):
            raise ValueError(f"{len(texts)} texts but {len(options)} option lists")
        out: list[Judgment] = []
        for text, opts in zip(texts, options):
            if text is None or not opts:
                out.append({"parsed_index": None, "error": "no response" if text is None else "no options"})
            else:
                out.append({"parsed_index": self._index(text, opts)})
        return out
