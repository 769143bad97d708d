"""``evalcore score mcq``: multiple-choice responses → parsed answers, per-order metrics, report."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np
import pandas as pd
import typer

from evalcore.judges.mcq_muchomusic import parse_muchomusic
from evalcore.judges.mcq_string import parse_choice
from evalcore.metrics.mcq_orders import METRICS, summarize_orders
from evalcore.scoring.cli import score_app
from evalcore.scoring.io import (InputError, arrow_safe, default_group_by, fail, fmt, is_missing, read_rows,
                                 write_outputs)

REQUIRED = ["question_id", "order_id", "options", "correct_index", "response"]
PARSERS: dict[str, Callable[[str, Sequence[str]], int]] = {"strict": parse_choice, "muchomusic": parse_muchomusic}
_OWN = {*REQUIRED, "_input_error", "parsed_index", "correct", "error"}


def _options(v: Any) -> list[str] | None:
    """The option list, or None unless it is a list (or array) of at least two strings."""
    if isinstance(v, (list, tuple, np.ndarray)):
        opts = list(v)
        if len(opts) >= 2 and all(isinstance(o, str) for o in opts):
            return opts
    return None


def _index(v: Any) -> int | None:
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    return None


def row_error(row: dict[str, Any]) -> str | None:
    """Why a row cannot be scored, or None."""
    if not is_missing(row.get("_input_error")):
        return str(row["_input_error"])
    for col in ("question_id", "order_id"):
        if is_missing(row.get(col)):
            return f"missing {col}"
    opts = _options(row.get("options"))
    if opts is None:
        return "options is not a list of at least two strings"
    idx = _index(row.get("correct_index"))
    if idx is None or not 0 <= idx < len(opts):
        return f"correct_index {row.get('correct_index')!r} is not an index into {len(opts)} options"
    response = row.get("response")
    if is_missing(response):
        return "no response"
    if not isinstance(response, str):
        return f"response is not a string ({type(response).__name__})"
    return None


def score_rows(df: pd.DataFrame, parser: str) -> pd.DataFrame:
    """Input rows + ``parsed_index`` (-1 = unanswered, null on error), ``correct``, ``error``."""
    parse = PARSERS[parser]
    parsed: list[Any] = []
    correct: list[Any] = []
    errors: list[str | None] = []
    for row in df.to_dict("records"):
        err = row_error(row)
        errors.append(err)
        if err is None:
            p = parse(row["response"], _options(row["options"]))  # type: ignore[arg-type]
            parsed.append(p)
            correct.append(p == _index(row["correct_index"]))
        else:
            parsed.append(None)
            correct.append(None)
    out = df.drop(columns=["_input_error"], errors="ignore").copy()
    out["parsed_index"] = pd.array(parsed, dtype="Int64")
    out["correct"] = pd.array(correct, dtype="boolean")
    out["error"] = pd.array(errors, dtype="string")
    return out


def render_report(summary: pd.DataFrame, by: list[str], parser: str, counts: tuple[int, int, int]) -> str:
    """A short Markdown report: one row per group."""
    n_in, n_ok, n_err = counts
    lines = ["# Multiple-choice scores", "",
             f"Parser: `{parser}`. Rows: {n_in} in = {n_ok} scored + {n_err} errored.", "",
             "| group | questions | accuracy (mean ± SD over orders) | consistency | IFR |",
             "|---|---|---|---|---|"]
    if summary.empty:
        return "\n".join([*lines, "| (no scored rows) | | | | |", ""])
    keyed = summary.assign(_k=[tuple(r) for r in summary[by].itertuples(index=False)] if by else [()] * len(summary))
    for key, g in keyed.groupby("_k", sort=False):
        v = dict(zip(g["metric"], g["value"]))
        n = int(g["n"].iloc[0])
        name = ", ".join(f"{c}={k}" for c, k in zip(by, key)) or "all"
        lines.append(f"| {name} | {n} | {fmt(v['accuracy_mean'])} ± {fmt(v['accuracy_sd'])} "
                     f"| {fmt(v['consistency'])} | {fmt(v['ifr'])} |")
    lines += ["", "Definitions:", ""]
    defs = summary.drop_duplicates("metric").set_index("metric")["definition"]
    lines += [f"- **{m}**: {defs[m]}" for m in METRICS if m in defs.index]
    return "\n".join([*lines, ""])


@score_app.command("mcq")
def score_mcq(
    input_uri: str = typer.Argument(..., metavar="INPUT", help="Parquet or JSONL rows: question_id, order_id, "
                                    "options, correct_index (0-based), response, plus grouping columns."),
    out: str = typer.Option(..., "--out", help="Output directory (local path or s3://)."),
    parser: str = typer.Option("strict", "--parser", help="Answer parser: strict | muchomusic."),
    group_by: Optional[str] = typer.Option(None, "--group-by", help="Comma-separated group columns "
                                           "(default: every non-required scalar column; '' = no groups)."),
    seed: int = typer.Option(0, "--seed", help="Bootstrap seed."),
    resamples: int = typer.Option(1000, "--resamples", help="Bootstrap resamples."),
) -> None:
    """Parse multiple-choice answers and score accuracy over option orders, consistency and IFR."""
    if parser not in PARSERS:
        fail("mcq", f"unknown parser {parser!r}; choose one of: {', '.join(PARSERS)}")
    if resamples < 1:
        fail("mcq", f"--resamples must be at least 1, got {resamples}")
    try:
        df = read_rows(input_uri, REQUIRED)
    except InputError as e:
        fail("mcq", str(e), code=1)
    if group_by is None:
        by = default_group_by(df, _OWN)
    else:
        by = [c.strip() for c in group_by.split(",") if c.strip()]
        unknown = [c for c in by if c not in df.columns or c in _OWN]
        if unknown:
            fail("mcq", f"--group-by: not input grouping column(s) {unknown}; columns are {list(df.columns)}")
    per_item = score_rows(df, parser)
    ok = per_item[per_item["error"].isna()]
    scored = ok.assign(parsed_index=ok["parsed_index"].astype(int), correct=ok["correct"].astype(bool))
    summary = summarize_orders(scored, by, resamples=resamples, seed=seed)
    n_in, n_ok = len(per_item), len(scored)
    counts = (n_in, n_ok, n_in - n_ok)
    per_item = arrow_safe(per_item, int_columns=("question_id", "order_id", "correct_index"))
    write_outputs(out, per_item, summary, render_report(summary, by, parser, counts))
    typer.echo(f"rows: {n_in} in = {n_ok} scored + {n_in - n_ok} errored", err=True)
    typer.echo(f"wrote {out}/per_item.parquet, summary.parquet, report.md", err=True)
