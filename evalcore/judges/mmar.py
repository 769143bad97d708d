"""The MMAR answer-matching rule: MMAU's word-set match, as MMAR's ``code/evaluation.py`` keeps it.

Source: github.com/ddlBoJack/MMAR, ``code/evaluation.py`` (commit 3bce090a), whose README says the evaluation
is modified from MMAU's; its ``string_match`` is the same rule (only the output key, ``answer_prediction``, and
the grouping by ``modality`` differ). The rule and its quirks: :mod:`evalcore.judges.mmau`.
"""

from __future__ import annotations

from evalcore.judges.parser import ParserJudge
from evalcore.judges.mmau import parse_mmau
from evalcore.judges.base import JUDGES


@JUDGES.register("mcq_mmar")
class McqMmarJudge(ParserJudge):
    """MCQ judge: the option chosen in each response by MMAR's published (MMAU's) word-set match."""

    parse = staticmethod(parse_mmau)
