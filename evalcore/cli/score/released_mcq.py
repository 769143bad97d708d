"""The MCQ music benchmarks' released output files as ``evalcore score mcq`` rows (``--released mmau|mmar``).

A released scorer reads the benchmark's own records with the model's answer added under its key — MMAU's
``evaluation.py`` (commit 110127f5): the test-mini JSON list with ``model_output``; MMAR's ``code/evaluation.py``
(commit 3bce090a): ``MMAR-meta.json`` or ``.jsonl`` with ``answer_prediction`` — and matches it against ``choices``
and ``answer``. Each record becomes one row: ``question_id`` = ``id``, one option order (the released one),
``options`` = ``choices``, ``correct_index`` = the answer's place among them, ``response`` = the answer under the
key, and the record's ``task`` (MMAU) or ``modality`` (MMAR), which the released scripts break accuracy down by.
Where the released scripts **skip** a record without the key, evalcore keeps it as an error row saying so
(counted, never dropped); an answer that is not one of the choices is an error row too.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from evalcore.datasets.released_mcq import read_records, record_problem, text_list

#: benchmark → (the key of the model's answer, the column the released script breaks accuracy down by)
RELEASED = {"mmau": ("model_output", "task"), "mmar": ("answer_prediction", "modality")}


def released_rows(uri: str, benchmark: str) -> pd.DataFrame:
    """The rows of a released output file of ``benchmark`` (:data:`RELEASED`), with ``_input_error`` set on the
    records that cannot be scored."""
    key, group = RELEASED[benchmark]
    rows: list[dict[str, Any]] = []
    for n, rec in enumerate(read_records(uri), 1):
        problem = record_problem(benchmark.upper(), rec)
        row: dict[str, Any] = {"question_id": f"#{n}", "order_id": 0, "options": None, "correct_index": None,
                               "response": None, group: None, "_input_error": problem}
        if problem is None:
            choices = text_list(rec.get("choices"))
            answer = rec.get("answer")
            row.update(question_id=str(rec.get("id") or f"#{n}"), options=choices, response=rec.get(key),
                       **{group: rec.get(group)})
            if choices is None:
                row["_input_error"] = "choices is not a list of strings"
            elif answer not in choices:
                row["_input_error"] = f"answer {str(answer)[:60]!r} is not one of its choices"
            else:
                row["correct_index"] = choices.index(answer)
                if key not in rec:
                    row["_input_error"] = f"no {key} (the released scorer skips the record; counted here)"
        rows.append(row)
    return pd.DataFrame(rows)
