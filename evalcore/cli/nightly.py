"""``evalcore nightly`` and ``evalcore compare`` (registered on the main app in :mod:`evalcore.cli`).

Exit codes of ``evalcore nightly``: 0 ok (checkpoints that failed are ``failed`` rows in the ledger and on the
dashboard, not an exit code); 1 the nightly itself failed (storage unreachable, a corrupt or newer ledger), or
stopped because another nightly took over a checkpoint it was evaluating (it stalled past ``lease_seconds``);
2 a config mistake; 3 a checkpoint evaluated *tonight* has a flagged comparison and the config says
``fail_on_regression`` (its flagged rows are printed). Flags of checkpoints evaluated on earlier nights stay
on the dashboard and never make a later night exit 3.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Optional

import pyarrow as pa
import typer

from evalcore.reports import console

from evalcore.core import storage
from evalcore.runconfig.config import ConfigError
from evalcore.core.errors import ExitCode
from evalcore.nightly import compare as cmp
from evalcore.nightly.config import load_nightly, resolve_prefixes
from evalcore.nightly.demo import demo_config
from evalcore.nightly.ledger import LedgerError
from evalcore.nightly.night import FLAG_PRINT, night
from evalcore.core.nightly_outcome import Verdict
from evalcore.reports.html import markdown_html, page
from evalcore.reports.tables_html import TESTS, comparison_rows, p_value, signed, table_html, table_md
from evalcore.core.tracking_config import TrackFlagError, with_track_flags


def load_nightly_or_exit(config: Optional[Path], out: Optional[str]):
    """The nightly config (or the embedded demo with its checkpoint series), relative series prefixes under its
    root; a mistake exits 2."""
    try:
        if config is None:
            return demo_config(out)
        cfg = load_nightly(config)
    except ConfigError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    return resolve_prefixes(cfg.with_root(out))  # a relative prefix is read under the (final) nightly root


def nightly(
    config: Optional[Path] = typer.Argument(None, help="Nightly config (YAML): a run config's suite plus `series`. "
                                            "Omit to run the embedded offline demo."),
    out: Optional[str] = typer.Option(None, "--out", help="Nightly root: a local path or s3://bucket/prefix "
                                      "(default: the config's storage.root, else ./runs/<name>)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Every library's log lines, and every flagged "
                                 "row even without fail_on_regression."),
    quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP + " Still printed: notes, and the "
                               "checkpoints that regressed, failed or were lost, with why."),
    track: Optional[list[str]] = typer.Option(None, "--track", metavar="SINK[=VALUE]",
                                              help="Also log each checkpoint evaluated tonight, at its training step, "
                                              "to mlflow[=URI], wandb[=PROJECT] or lm_eval[=DIR] (repeatable)."),
) -> None:
    """Evaluate the new checkpoints of every series, compare them with the previous one and the baseline,
    write regressions.parquet, history.parquet and dashboard.html / .md under the root.

    Exit status: 0 ok, 1 the nightly failed, 2 config mistake, 3 a checkpoint evaluated tonight regressed
    (with fail_on_regression)."""
    console.setup(verbose, quiet)
    cfg = load_nightly_or_exit(config, out)
    try:
        cfg = with_track_flags(cfg, track)
    except TrackFlagError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    if not quiet:
        typer.echo(f"evalcore: nightly {cfg.name!r} → {cfg.root}", err=True)
    t = time.perf_counter()
    try:
        result = night(cfg)
    except LedgerError as e:
        typer.echo(f"evalcore: {e}", err=True)
        raise typer.Exit(code=ExitCode.FAILED)
    except Exception as e:  # noqa: BLE001 - storage unreachable and the like; the ledger keeps what finished
        logging.getLogger("evalcore").debug("nightly failed", exc_info=True)
        typer.echo(f"evalcore: the nightly failed: {type(e).__name__}: {e}", err=True)
        raise typer.Exit(code=ExitCode.FAILED)
    if result.lost:
        lost = ", ".join(map(str, result.lost))
        typer.echo(f"evalcore: the nightly stopped: another nightly took over {lost} while this one "
                   "stalled past lease_seconds; this one committed nothing more and wrote nothing shared (comparisons, "
                   "dashboard, nightly.json, webhook): the other nightly's are current", err=True)
        raise typer.Exit(code=ExitCode.FAILED)
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    t_ = result.tonight
    flagged, earlier = result.flagged_tonight, len(result.flagged) - len(result.flagged_tonight)
    drops = sum(v.flagged for v in (t_.checkpoints if t_ else []))
    if not quiet:
        typer.echo(f"nightly {t_.counts.line() if t_ else ''}; {drops} drop(s) flagged on them, each counted once "
                   f"({len(flagged)} comparison(s): against the previous checkpoint and the baseline)"
                   + (f"; {earlier} flagged comparison(s) from earlier nights, on the dashboard" if earlier else "")
                   + f"; {time.perf_counter() - t:.1f} s; wrote {cfg.root}/dashboard.html and nightly.json", err=True)
    for v in (t_.checkpoints if t_ else []):
        if quiet and v.verdict not in (Verdict.REGRESSED, Verdict.FAILED, Verdict.LOST):
            continue
        why = (f" — {v.reason[:300]}" if v.reason and v.verdict in (Verdict.FAILED, Verdict.LOST, Verdict.REGRESSED,
                                                                      Verdict.IMPROVED) else "")
        listens = f", listens {v.listening}" if v.listening else ""
        typer.echo(f"  {v.key}: {v.verdict}{listens}{why}", err=True)
    if len(flagged) and (cfg.fail_on_regression or verbose):
        show = flagged[FLAG_PRINT].copy()
        for col in ("delta", "ci_low", "ci_high"):
            show[col] = show[col].map(signed)
        show["p_adjusted"] = show["p_adjusted"].map(p_value)
        typer.echo(show.to_string(index=False))
    elif len(flagged) and not quiet:  # one line per checkpoint and reference; the dashboard holds the rows
        for (series, ckpt, ref), rows in flagged.groupby(["series", "checkpoint", "reference"], sort=False):
            worst = rows.loc[rows["delta"].abs().idxmax()]
            typer.echo(f"flagged: {series}/{ckpt} vs {ref}: {len(rows)} comparison(s) on "
                       f"{', '.join(sorted(set(rows['metric'])))}; largest {worst['metric']} {worst['condition']} "
                       f"{worst['delta']:+.3f}")
    if result.exit_code:
        raise typer.Exit(code=result.exit_code)


def _tests(rows) -> str:
    """The tests behind the comparisons' p-values, with how many rows each (e.g. ``McNemar exact (12), paired t
    (30)``)."""
    counts = rows["test"].value_counts() if len(rows) else {}
    return ", ".join(f"{TESTS.get(t, t)} ({int(n)})" for t, n in sorted(dict(counts).items())) or "none"


def compare(
    run_a: str = typer.Argument(..., metavar="RUN_A", help="The reference run's root (path or s3:// URI)."),
    run_b: str = typer.Argument(..., metavar="RUN_B", help="The run compared with it."),
    out: str = typer.Option("compare", "--out", help="Where compare.md, compare.html and compare.parquet go."),
    resamples: int = typer.Option(1000, "--resamples", min=100),
    seed: int = typer.Option(0, "--seed"),
    min_effect: float = typer.Option(0.05, "--min-effect", min=0.0),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0, max=1.0),
    quiet: bool = typer.Option(False, "--quiet"),
) -> None:
    """Compare two finished runs item by item (RUN_B − RUN_A): paired differences, bootstrap CIs (clips resampled
    where questions share one), Holm-adjusted p-values (McNemar's exact test for 0/1 accuracy, else a paired
    t-test), flagged drops; the same tables as the nightly, written to ``out``; on the terminal, plain lines: how
    many were flagged, each flagged one, where the tables are (:func:`said`). Exit 2 when a run is not a finished
    run."""
    try:
        fa, fb = cmp.suite_fingerprint(run_a), cmp.suite_fingerprint(run_b)
        cur, ref = cmp.load_scores(run_b), cmp.load_scores(run_a)
        rows = cmp.compare_scores(cur, ref, resamples, 0.95, seed)
    except (FileNotFoundError, OSError, KeyError) as e:
        typer.echo(f"not a finished run: {e}", err=True)
        raise typer.Exit(code=ExitCode.USAGE)
    rows = cmp.decide(rows, lambda _m: min_effect, alpha)
    note = "" if fa == fb else (f"\n\n**The suites differ** (fingerprint {fa} ≠ {fb}): the items or config are not "
                                 "the same; only shared items are compared.")
    only_b, only_a = cmp.unpaired(cur, ref)
    if only_a or only_b:
        note += ("\n\n**Not compared** (a model of one run only; models are paired by name, never mixed): "
                 + "; ".join(f"{', '.join(ms)} in {which} only" for ms, which in ((only_a, "RUN_A"), (only_b, "RUN_B"))
                             if ms) + ".")
    shown = comparison_rows(rows, with_model=True)  # flagged first, then improved; formatted
    head = (f"# {run_b} vs {run_a}\n\n{int(rows['flagged'].sum())} of {len(rows)} comparisons flagged, "
            f"{int(rows['improved'].sum())} improved (Holm-adjusted p-values, α={alpha}, minimum effect "
            f"{min_effect}). Tests: {_tests(rows)}. CIs resample clips (every question of a clip together) where "
            f"questions share one, else items (column CI over).{note}\n\n")
    md = f"{head}{table_md(shown)}\n"
    storage.makedirs(out)
    storage.write_text(storage.join(out, "compare.md"), md)
    storage.write_text(storage.join(out, "compare.html"), page(f"{run_b} vs {run_a}",
                                                               markdown_html(head) + table_html(shown)))
    storage.write_parquet(pa.Table.from_pandas(rows, preserve_index=False), storage.join(out, "compare.parquet"))
    for line in said(shown, rows, alpha, min_effect, out, quiet):
        typer.echo(line)


#: the most flagged comparisons ``evalcore compare`` names on the terminal (compare.md holds them all)
FLAGGED_SHOWN = 10


def said(shown: list[dict[str, str]], rows, alpha: float, min_effect: float, out: str, quiet: bool = False
         ) -> list[str]:
    """What ``evalcore compare`` prints, as plain text (the Markdown is in compare.md): the count line, one line per
    flagged comparison (the first :data:`FLAGGED_SHOWN`), and the files (``quiet``: the flagged lines only)."""
    flagged = [r for r in shown if r["_class"] == "flag"]
    lines = [] if quiet else [f"compare: {len(flagged)} of {len(rows)} comparisons flagged, "
                              f"{int(rows['improved'].sum()) if len(rows) else 0} improved (Holm-adjusted p-values, "
                              f"alpha {alpha}, minimum effect {min_effect})"]
    for r in flagged[:FLAGGED_SHOWN]:
        who = f"{r['model']} · " if "model" in r else ""
        lines.append(f"flagged: {who}{r['protocol']} · {r['condition']} · {r['metric']}: {r['difference [CI]']}, "
                     f"n={r['n']}, p (Holm) {r['p (Holm)']}")
    if len(flagged) > FLAGGED_SHOWN:
        lines.append(f"flagged: … and {len(flagged) - FLAGGED_SHOWN} more (compare.md)")
    if not quiet:
        where = out if storage.is_s3(out) else str(Path(out).resolve())
        lines += [storage.join(where, name) for name in ("compare.md", "compare.html", "compare.parquet")]
    return lines
