"""The MCQ scorer as the scoring stage builds it: it reads each judge's published rule from the judges' registry.

A judged row names its judge (``judge``: ``name@version``), and a judge that follows a benchmark's released scorer
names that rule (:class:`~evalcore.core.schema.PublishedRule`, :func:`evalcore.judges.base.published_rule`); the MCQ
scorer names it in the definitions of ``accuracy``, ``accuracy_strict`` and ``verdicts_differ``. The scorers import
no judge (docs/layers.md): the scoring stage, which sits above both, hands the scorer the lookup here.
"""

from __future__ import annotations

from typing import ClassVar

from evalcore.judges.base import published_rule
from evalcore.scorers import mcq
from evalcore.scorers.mcq_verdicts import Rules


class MCQScorer(mcq.MCQScorer):
    """:class:`evalcore.scorers.mcq.MCQScorer` with the registered judges' published rules."""

    rules: ClassVar[Rules] = staticmethod(published_rule)
