"""``evalcore reproduce OUTPUTS PAPER/TABLE...``: any summary beside the paper, after the fact. OUTPUTS is a run
root (its ``tables/summary.parquet``) or an ``evalcore score`` output directory (its ``summary.parquet``); one table
or several (``factual/table8 factual/table9``); the same rows as a run with ``reproduces:``
(:mod:`evalcore.reports.reproduction`: the tables' cells, and their papers' prose numbers the summary computes) go to
``reproduction.parquet``, ``reproduction.md`` and ``reproduction.html`` under ``--out``.

An ``evalcore score`` summary has no protocol, dataset, condition or variant column: ``--condition`` and
``--variant`` say which ones were scored (default ``correct`` / ``default``); protocol and dataset, when the
summary has none, match any published cell.
"""

from __future__ import annotations

from typing import Optional

import pyarrow as pa
import typer

from evalcore.reports import console

from evalcore.core import storage
from evalcore.core.errors import ExitCode
from evalcore.reports import published, reproduction as beside
from evalcore.reports.html import markdown_html, page


def reproduce(
    outputs: str = typer.Argument(..., metavar="OUTPUTS", help="A run root or an `evalcore score` output "
                                  "directory (path or s3:// URI)."),
    tables: list[str] = typer.Argument(..., metavar="PAPER/TABLE...", help="One or more published tables, e.g. "
                                       "factual/table8 factual/table9 (the keys of configs/paper/published.csv)."),
    out: Optional[str] = typer.Option(None, "--out", help="Where reproduction.parquet, .md and .html go (default: "
                                      "OUTPUTS)."),
    published_values: Optional[str] = typer.Option(None, "--published-values", help="Another published-values "
                                                   "file with the same columns."),
    condition: str = typer.Option("correct", "--condition", help="The condition a summary without a condition "
                                  "column scored."),
    variant: str = typer.Option("default", "--variant", help="The variant a summary without a variant column "
                                "scored."),
    confidence: float = typer.Option(0.95, "--confidence", min=0.5, max=0.999, help="The level of the summary's "
                                     "intervals, as the report states it."),
    quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP + " The comparison is not printed (it is in "
                               "reproduction.md)."),
) -> None:
    """Put each published cell of each PAPER/TABLE beside the value OUTPUTS has for the same key: the difference,
    and whether the published value lies in our CI; cells OUTPUTS cannot give are named with the reason; the
    papers' numbers in the prose follow where OUTPUTS computes them. Exit 2 when OUTPUTS holds no summary or a table
    is not in the published values."""
    try:
        known = published.table_keys(published.read(published_values or published.PUBLISHED_CSV))
    except (OSError, published.PublishedError) as e:
        typer.echo(f"--published-values: {str(e)[:300]}", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    unknown = [t for t in tables if t not in known]
    if unknown:
        typer.echo(f"PAPER/TABLE: no published cell of {unknown[0][:80]!r} (tables: {', '.join(known[:12])} …)",
                   err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    tables = list(dict.fromkeys(tables))
    found = [u for u in (storage.join(outputs, "tables", "summary.parquet"), storage.join(outputs, "summary.parquet"))
             if storage.exists(u)]
    if not found:
        typer.echo(f"OUTPUTS: {outputs} holds no tables/summary.parquet or summary.parquet", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    summary = storage.read_parquet(found[0]).to_pandas()
    for col, value in (("condition", condition), ("variant", variant)):
        if col not in summary.columns:
            summary[col] = value
    rep = beside.compare(summary, tables, published_values)
    title = f"{outputs} beside {', '.join(tables)}"
    target = out or outputs
    md = f"# {title}\n" + beside.section(rep, tables, confidence,
                                         storage.join(storage.absolute(target), "reproduction.parquet"))
    storage.makedirs(target)
    storage.write_parquet(pa.Table.from_pandas(rep, preserve_index=False), storage.join(target, "reproduction.parquet"))
    storage.write_text(storage.join(target, "reproduction.md"), md)
    storage.write_text(storage.join(target, "reproduction.html"), page(title, markdown_html(md)))
    if not quiet:
        typer.echo(md)
