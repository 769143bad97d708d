"""Input and output of the ``evalcore score`` commands: Parquet/JSONL in, Parquet + Markdown out."""

from __future__ import annotations

import io
import json
import math
from typing import Any, Iterable, NoReturn, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import typer

from evalcore import storage
from evalcore.metrics.base import Aggregate
from evalcore.reports.tables import aggregate

SUMMARY_TAIL = ["kind", "metric", "value", "ci_low", "ci_high", "n", "definition"]


class InputError(ValueError):
    """An unreadable input file or one that lacks a required column."""


def is_missing(v: Any) -> bool:
    """True for None, a float NaN and ``pd.NA`` (never for lists or arrays)."""
    return v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v))


def default_group_by(df: pd.DataFrame, exclude: set[str]) -> list[str]:
    """Every column not in ``exclude`` whose values hold no lists, tuples, dicts, sets or arrays."""
    def scalar(col: str) -> bool:
        return not any(isinstance(v, (list, tuple, dict, set, np.ndarray)) for v in df[col])
    return [c for c in df.columns if c not in exclude and scalar(c)]


def _json_default(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (set, frozenset)):
        return list(v)
    return str(v)


def _json_value(v: Any) -> Any:
    if is_missing(v):
        return None
    if isinstance(v, str):
        return v
    return json.dumps(v, default=_json_default, ensure_ascii=False)


def arrow_safe(df: pd.DataFrame, int_columns: Sequence[str] = ()) -> pd.DataFrame:
    """Make columns writable to Parquet without dropping data.

    Float columns named in ``int_columns`` whose values are all integral (floats only because some
    rows lacked them) become nullable Int64. A column arrow cannot type (mixed values) keeps its
    strings and nulls; every other value becomes its JSON text.
    """
    out = df.copy()
    for col in out.columns:
        if col in int_columns and pd.api.types.is_float_dtype(out[col]):
            vals = out[col].dropna()
            if (vals == vals.round()).all():
                out[col] = out[col].astype("Int64")
        try:
            pa.array(out[col], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            out[col] = pd.Series([_json_value(v) for v in out[col].astype(object)], index=out.index, dtype=object)
    return out


def fmt(v: Any) -> str:
    """A number to three decimals, or an en dash for a missing value."""
    return "–" if is_missing(v) else f"{v:.3f}"


def fail(command: str, message: str, code: int = 2) -> NoReturn:
    """Print ``evalcore score <command>: <message>`` to stderr and exit with ``code``."""
    typer.echo(f"evalcore score {command}: {message}", err=True)
    raise typer.Exit(code=code)


def read_rows(uri: str, required: Iterable[str]) -> pd.DataFrame:
    """Rows of a Parquet or JSONL file (local or s3://); fails naming any missing required column.

    A JSONL line that is not a JSON object is kept as a row whose ``_input_error`` says why.
    """
    try:
        data = storage.read_bytes(uri)
    except (FileNotFoundError, OSError) as e:
        raise InputError(f"cannot read {uri}: {e}") from None
    if uri.endswith(".parquet"):
        df = pq.read_table(io.BytesIO(data)).to_pandas()
    else:
        rows: list[dict[str, Any]] = []
        for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                row = {"_input_error": f"line {n}: invalid JSON ({e.msg})"}
            if not isinstance(row, dict):
                row = {"_input_error": f"line {n}: not a JSON object"}
            rows.append(row)
        df = pd.DataFrame(rows)
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{uri}: missing required column(s) {missing}; found {list(df.columns)}")
    if "_input_error" not in df.columns:
        df["_input_error"] = None
    return df


def summarize(per_item: pd.DataFrame, aggregates: Iterable[Aggregate], group_cols: list[str], *, unit: str,
              resamples: int = 1000, confidence: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Long-form summary (group columns, kind, metric, value, ci_low, ci_high, n, definition)."""
    df = per_item.copy()
    by = list(group_cols)
    if not by:
        df["_all"] = "all"
        by = ["_all"]
    rows = aggregate(df, list(aggregates), by, unit=unit, resamples=resamples, confidence=confidence, seed=seed)
    out = pd.DataFrame(rows, columns=[*by, *SUMMARY_TAIL])
    return out.drop(columns=["_all"], errors="ignore")


def write_outputs(out_dir: str, per_item: pd.DataFrame, summary: pd.DataFrame, report: str | None = None) -> None:
    """``out_dir/per_item.parquet``, ``out_dir/summary.parquet`` and optionally ``out_dir/report.md``."""
    storage.write_parquet(pa.Table.from_pandas(per_item, preserve_index=False), storage.join(out_dir, "per_item.parquet"))
    storage.write_parquet(pa.Table.from_pandas(summary, preserve_index=False), storage.join(out_dir, "summary.parquet"))
    if report is not None:
        storage.write_text(storage.join(out_dir, "report.md"), report)


#: the bootstrap options every ``evalcore score`` command shares
SEED_OPTION: int = typer.Option(0, "--seed", help="Bootstrap seed.")
RESAMPLES_OPTION: int = typer.Option(1000, "--resamples", min=1, help="Bootstrap resamples.")
