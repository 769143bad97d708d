"""``evalcore subset RUN --out FILE``: the audio-required items of one benchmark of a finished run, in the benchmark's
own format — a RUListening-style benchmark from any benchmark.

The run marked each item of a benchmark answered without audio (``tables/answerable_without_audio.parquet``,
:mod:`evalcore.scoring.audio_required`); the items no answer without audio got right are written by the benchmark's
dataset (:meth:`evalcore.datasets.base.Dataset.write_subset`: MMAU's and MMAR's JSON, MuChoMusic's CSV, an items
file's JSON Lines), so the benchmark's own loader reads them back with the run's dataset params but ``path``; a
dataset with no released format of its own (the synthetic demo) gets the run's item rows as JSON Lines, which the
``items_file`` dataset reads.
"""

from __future__ import annotations

import json
from typing import Optional

import typer
import yaml

from evalcore.core import storage
from evalcore.core.errors import ExitCode
from evalcore.datasets.base import DATASETS
from evalcore.reports import console

MARKS = ("tables", "answerable_without_audio.parquet")


def _fail(message: str) -> None:
    typer.echo(f"evalcore subset: {message}", err=True)
    raise typer.Exit(ExitCode.USAGE)


def subset(
    run_root: str = typer.Argument(..., metavar="RUN", help="A finished run's root (path or s3:// URI)."),
    out: str = typer.Option(..., "--out", help="The file to write (local path or s3:// URI)."),
    benchmark: Optional[str] = typer.Option(None, "--benchmark", help="PROTOCOL/DATASET, when the run marked more "
                                            "than one benchmark."),
    quiet: bool = typer.Option(False, "--quiet", help=console.QUIET_HELP),
) -> None:
    """Write the items of a benchmark that no answer without audio got right, in the benchmark's own format."""
    try:
        marks = storage.read_parquet(storage.join(run_root, *MARKS)).to_pandas()
    except (OSError, ValueError):
        _fail(f"{run_root}: no {'/'.join(MARKS)}: the run answered nothing without audio (add the text_only "
              "condition, or a model that reads no audio such as text_prior)")
    benches = sorted({f"{p}/{d}" for p, d in zip(marks["protocol"], marks["dataset"])})
    chosen = benchmark or (benches[0] if len(benches) == 1 else None)
    if chosen not in benches:
        _fail(f"--benchmark: choose one of {', '.join(benches)}" + (f" (not {benchmark!r})" if benchmark else ""))
    proto, dataset = chosen.split("/", 1)
    mine = marks[(marks["protocol"] == proto) & (marks["dataset"] == dataset)]
    keep = set(mine.loc[~mine["answerable_without_audio"].astype(bool), "item_id"])
    config = yaml.safe_load(storage.read_text(storage.join(run_root, "config.yaml")))
    ds = next(d for d in config["datasets"] if d["name"] == dataset)
    written = DATASETS.build(ds["kind"], **(ds.get("params") or {})).write_subset(keep, out)
    form = f"{ds['kind']}'s own format"
    if written is None:
        items = storage.read_parquet(storage.join(run_root, "items")).to_pandas()
        rows = items[(items["dataset"] == dataset) & items["item_id"].isin(keep)].drop(columns=["dataset"])
        records = [{k: v for k, v in r.items() if v is not None} for r in
                   rows.astype(object).where(rows.notna(), None).to_dict("records")]
        storage.write_text(out, "".join(json.dumps(r, ensure_ascii=False, default=_plain) + "\n" for r in records))
        written, form = len(records), "item rows (JSON Lines, the items_file dataset reads them)"
    if not quiet:
        typer.echo(f"{chosen}: {written} audio-required items of {len(mine)} ({len(mine) - len(keep)} answerable "
                   f"without audio left out) → {out} ({form})")


def _plain(v: object) -> object:
    tolist = getattr(v, "tolist", None)
    return tolist() if tolist is not None else str(v)
