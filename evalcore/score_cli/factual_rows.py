"""What both ``evalcore score factual`` formats share: the response and label-list checks, the grouping
columns and the Markdown report."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from evalcore.reports.tables_html import fmt
from evalcore.score_cli.io import default_group_by, fail, is_missing


def label_list(value: Any) -> list[str] | None:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return list(value)
    return None


def response_error(row: dict[str, Any]) -> str | None:
    """Why a row's input line or ``response`` cannot be scored, or None."""
    if isinstance(row.get("_input_error"), str):
        return row["_input_error"]
    response = row.get("response")
    if is_missing(response):
        return "response missing"
    if not isinstance(response, str):
        return f"response is not a string ({type(response).__name__})"
    return None


def render_report(task: str, extractor: str, counts: dict[str, int], summary: pd.DataFrame,
                  group_cols: list[str], labels: pd.DataFrame, dropped: int | None = None,
                  agreement: dict[str, float] | None = None, answer_format: str = "standard") -> str:
    """A short Markdown report: counts, the summary table and the per-label table."""
    title = (f"task `{task}`, extractor `{extractor}`" if answer_format == "standard"
             else f"format `{answer_format}`, task `{task}`")
    lines = [f"# Factual QA — {title}", "",
             f"rows: {counts['in']} in = {counts['scored']} scored + {counts['errored']} errored", ""]
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


def group_columns(df: pd.DataFrame, group_by: Optional[str], reserved: set[str]) -> list[str]:
    """``--group-by`` columns (default: every scalar column outside ``reserved`` and ``item_id``); fails naming
    a column that is not an input grouping column."""
    if group_by is None:
        return default_group_by(df, reserved | {"item_id"})
    groups = [c.strip() for c in group_by.split(",") if c.strip()]
    unknown = [c for c in groups if c not in df.columns or c in reserved]
    if unknown:
        fail("factual", f"--group-by: no such grouping column(s) {unknown}; columns: {list(df.columns)}")
    return groups

