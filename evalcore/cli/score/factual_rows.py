"""What both ``evalcore score factual`` formats share: the response and label-list checks and the Markdown
report."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from evalcore.reports.tables_html import fmt
from evalcore.cli.score.io import text_error
from evalcore.cli.score.steps import Counts


def label_list(value: Any) -> list[str] | None:
    """``value`` as a list of strings (from a list, tuple or array of them), or None."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return list(value)
    return None


def response_error(row: dict[str, Any]) -> str | None:
    """Why a row's input line or ``response`` cannot be scored, or None."""
    if isinstance(row.get("_input_error"), str):
        return row["_input_error"]
    return text_error(row.get("response"), missing="response missing")


def render_report(task: str, extractor: str, counts: Counts, summary: pd.DataFrame,
                  group_cols: list[str], labels: pd.DataFrame, dropped: int | None = None,
                  agreement: dict[str, float] | None = None, answer_format: str = "standard") -> str:
    """A short Markdown report: counts, the summary table and the per-label table."""
    title = (f"task `{task}`, extractor `{extractor}`" if answer_format == "standard"
             else f"format `{answer_format}`, task `{task}`")
    lines = [f"# Factual QA — {title}", "",
             counts.line, ""]
    if dropped is not None:
        lines += [f"out-of-vocabulary labels dropped by the LLM extractor (not scored): {dropped}", ""]
    if agreement is not None:
        lines += [f"agreement llm vs lexicon on {agreement['n']} rows: exact match {fmt(agreement['exact'])}, "
                  f"mean Jaccard {fmt(agreement['jaccard'])}, micro F1 {fmt(agreement['f1'])} "
                  f"(P {fmt(agreement['precision'])}, R {fmt(agreement['recall'])}; lexicon as reference)", ""]
    lines += [f"| {' | '.join([*group_cols, 'metric', 'value', '95% CI', 'n'])} |",
              "|" + "---|" * (len(group_cols) + 4)]
    for r in summary.to_dict("records"):
        cells = [str(r[c]) for c in group_cols]
        ci = f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"
        lines.append(f"| {' | '.join([*cells, r['metric'], fmt(r['value']), ci, str(r['n'])])} |")
    if not labels.empty:
        lines += ["", "Per label:", "", f"| {' | '.join([*group_cols, 'label', 'support', 'P', 'R', 'F1'])} |",
                  "|" + "---|" * (len(group_cols) + 5)]
        for r in labels.to_dict("records"):
            cells = [str(r[c]) for c in group_cols] + [r["label"], str(int(r["support"]))]
            lines.append(f"| {' | '.join([*cells, fmt(r['precision']), fmt(r['recall']), fmt(r['f1'])])} |")
    return "\n".join(lines) + "\n"

