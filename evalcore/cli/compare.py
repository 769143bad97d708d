"""``evalcore compare RUN_A RUN_B``: the face of the nightly's comparison of two finished runs, with its options
described and a check first that the two runs are of one suite.

Two runs compare item by item only where they share items (the suite fingerprint covers the items, the config
apart from its models, and the metric definitions: :func:`evalcore.nightly.compare.suite_fingerprint`). Runs of
different suites exit 2 with one line naming what differs (items only in one run, with counts; shared items whose
content differs; config fields; metric definitions: :func:`evalcore.nightly.compare.suite_differences`) and the
flag to use, unless ``--shared-items`` asks for the items they share; runs that share no item exit 2 either way
(there would be nothing in the table). The comparison itself is :func:`evalcore.cli.nightly.compare`: models are
paired by name, never mixed.
"""

from __future__ import annotations

import typer

from evalcore.core.errors import ExitCode
from evalcore.cli.nightly import compare as compare_runs
from evalcore.nightly.compare import fingerprint_of, suite_differences, suite_parts

#: the most characters of the differences a refusal names
DIFF_CHARS = 600


def suite_problem(run_a: str, run_b: str, shared_items: bool) -> str | None:
    """Why RUN_A and RUN_B cannot be compared as asked (one line naming what differs), else None; a run that is
    not finished raises FileNotFoundError / OSError / KeyError."""
    pa_, pb = suite_parts(run_a), suite_parts(run_b)
    fa, fb = fingerprint_of(pa_), fingerprint_of(pb)
    if fa == fb:
        return None
    what = "; ".join(suite_differences(pa_, pb)) or "their item sets hash differently"
    what = what if len(what) <= DIFF_CHARS else what[:DIFF_CHARS - 1] + "…"
    keys_a = {(r["dataset"], r["item_id"]) for r in pa_["items"]}
    if not keys_a & {(r["dataset"], r["item_id"]) for r in pb["items"]}:
        return (f"RUN_A and RUN_B share no item: they are runs of different suites (fingerprint {fa} ≠ {fb}: "
                f"{what}); there is nothing to compare")
    if not shared_items:
        return (f"RUN_A and RUN_B are runs of different suites (fingerprint {fa} ≠ {fb}): {what}; add --shared-items "
                "to compare the items they share")
    return None


def compare(
    run_a: str = typer.Argument(..., metavar="RUN_A", help="The reference run's root (path or s3:// URI)."),
    run_b: str = typer.Argument(..., metavar="RUN_B", help="The run compared with it (path or s3:// URI)."),
    out: str = typer.Option("compare", "--out", help="Where compare.md, compare.html and compare.parquet go."),
    resamples: int = typer.Option(1000, "--resamples", min=100, help="Bootstrap resamples of the items (of the "
                                  "clips, where questions share one) behind each paired difference's confidence "
                                  "interval."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resampling (the same seed gives the same "
                             "intervals)."),
    min_effect: float = typer.Option(0.05, "--min-effect", min=0.0, help="Smallest drop, in the metric's own "
                                     "units, that is flagged (a significant but smaller change is not)."),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0, max=1.0, help="Family-wise error rate of the "
                                "Holm-adjusted tests over all comparisons (McNemar's exact test for accuracy with 0/1 "
                                "outcomes, else paired t-tests)."),
    shared_items: bool = typer.Option(False, "--shared-items", help="Compare runs of different suites on the items "
                                      "they share (by default such runs exit 2)."),
    quiet: bool = typer.Option(False, "--quiet", help="Print only the flagged comparisons (no count line, no file "
                               "paths)."),
) -> None:
    """Compare two finished runs item by item (RUN_B − RUN_A): paired differences, bootstrap CIs, Holm-adjusted
    p-values (each row names its test), flagged drops; the same tables as the nightly. Exit 2 when a run is not a
    finished run, or the runs are of different suites (see --shared-items). Prints the count of flagged
    comparisons, each flagged one, and where compare.md, .html and .parquet are (plain text).

    CIs resample clips where questions share one; accuracy with 0/1 outcomes gets McNemar's exact test, other rows
    a paired t-test."""
    try:
        problem = suite_problem(run_a, run_b, shared_items)
    except (FileNotFoundError, OSError, KeyError) as e:
        typer.echo(f"not a finished run: {e}", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    if problem is not None:
        typer.echo(problem, err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    compare_runs(run_a, run_b, out, resamples, seed, min_effect, alpha, quiet)
