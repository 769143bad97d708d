"""The MMAR answer-matching rule: MMAU's word-set match, as MMAR's ``code/evaluation.py`` keeps it.

Source: github.com/ddlBoJack/MMAR, ``code/evaluation.py`` (commit 3bce090a), whose README says the evaluation
is modified from MMAU's; its ``string_match`` is the same rule (only the output key, ``answer_prediction``, and
the grouping by ``modality`` differ). The rule, its quirks and its two verdicts (published by default, evalcore's
strict reading beside it): :mod:`evalcore.judges.mmau`.
"""

from __future__ import annotations

from evalcore.judges.base import JUDGES, PublishedRule
from evalcore.judges.mmau import RULE as MMAU_RULE
from evalcore.judges.mmau import McqMmauJudge

#: MMAR's released scorer: MMAU's rule, read at MMAR's commit
RULE = PublishedRule(source="github.com/ddlBoJack/MMAR code/evaluation.py string_match @ 3bce090a",
                     quirks=MMAU_RULE.quirks, strict=MMAU_RULE.strict)


@JUDGES.register("mcq_mmar")
class McqMmarJudge(McqMmauJudge):
    """MCQ judge: MMAR's published (MMAU's) word-set match, its verdict and the strict reading."""

    rule = RULE
