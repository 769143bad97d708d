"""Input and output of the ``evalcore score`` commands: Parquet/JSONL in, Parquet + Markdown out."""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from typing import Any, Iterable, NoReturn, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import typer

from evalcore.reports import console

from evalcore.core import jsonl, storage
from evalcore.core.errors import ExitCode
from evalcore.stats.aggregate import Aggregate, ItemStats, aggregate, mean_item_stats

SUMMARY_TAIL = ["kind", "metric", "value", "ci_low", "ci_high", "n", "definition"]


class InputError(ValueError):
    """An unreadable input file or one that lacks a required column."""


def is_missing(v: Any) -> bool:
    """True for None, a float NaN and ``pd.NA`` (never for lists or arrays)."""
    return v is None or v is pd.NA or (isinstance(v, (float, np.floating)) and math.isnan(v))


def text_error(value: Any, missing: str) -> str | None:
    """Why a row's ``response`` is no answer to read: ``missing`` when it has none, its type when it is not text;
    None for a string."""
    if is_missing(value):
        return missing
    if not isinstance(value, str):
        return f"response is not a string ({type(value).__name__})"
    return None


def index_value(v: Any) -> int | None:
    """An integral value as an int (integral floats too, from columns with nulls); None for anything else, bools
    included."""
    if isinstance(v, (bool, np.bool_)):
        return None
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    return None


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


def fail(command: str, message: str, code: int = ExitCode.USAGE) -> NoReturn:
    """Print ``evalcore score <command>: <message>`` to stderr and exit with ``code`` (default: a usage
    mistake, :class:`evalcore.core.errors.ExitCode`)."""
    typer.echo(f"evalcore score {command}: {message}", err=True)
    raise typer.Exit(code=int(code))


def exit_if_unscored(command: str, errors: Iterable[Any], n_scored: int, top: int = 3) -> None:
    """After the outputs are written: no row scored → exit :attr:`ExitCode.UNSCORED` naming the top reasons."""
    if n_scored:
        return
    reasons = Counter(str(e)[:80] for e in errors if not is_missing(e)).most_common(top)
    fail(command, "nothing could be scored; top reasons: " + (", ".join(f"{r} ×{n}" for r, n in reasons) or "none"),
         code=ExitCode.UNSCORED)


def unencodable(row: dict[str, Any]) -> str | None:
    """The column of ``row`` holding text that cannot be UTF-8 (a lone surrogate from a ``\\ud800`` escape), or None."""
    for key, value in row.items():
        stack = [key, value]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return repr(key) if isinstance(key, str) and key.isprintable() and key.isascii() else "a column name"
            elif isinstance(v, dict):
                stack.extend(v.keys())
                stack.extend(v.values())
            elif isinstance(v, list):
                stack.extend(v)
    return None


def _json_row(line: str, n: int) -> dict[str, Any]:
    """One JSONL line as a row; a line that is not a usable JSON object is a row whose ``_input_error`` says why."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        return {"_input_error": f"line {n}: invalid JSON ({e.msg})"}
    except RecursionError:
        return {"_input_error": f"line {n}: invalid JSON (nested too deeply)"}
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        return {"_input_error": f"line {n}: invalid JSON ({str(e).split(':')[0]})"}
    if not isinstance(row, dict):
        return {"_input_error": f"line {n}: not a JSON object"}
    if (col := unencodable(row)) is not None:
        return {"_input_error": f"line {n}: column {col} is not valid UTF-8 text"}
    return row


#: per-request column → the name item rows use for it, accepted in score inputs too (docs/items.md): the
#: 0-based index of the correct option in the row's ``options``
INPUT_ALIASES = {"correct_index": "correct_option"}


def _canonical_columns(df: pd.DataFrame, uri: str) -> pd.DataFrame:
    """Input columns under their per-request names (``correct_option`` → ``correct_index``); two names for one
    column that disagree are an input error."""
    for name, alias in INPUT_ALIASES.items():
        if alias not in df.columns:
            continue
        if name in df.columns:
            both = df[[name, alias]].dropna()
            if not (both[name] == both[alias]).all():
                raise InputError(f"{uri}: columns {name} and {alias} name one value (the correct option's index) "
                                 "and disagree; keep one")
            df = df.drop(columns=[alias])
        else:
            df = df.rename(columns={alias: name})
    return df


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
        for n, raw in jsonl.lines(data):
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            rows.append(_json_row(line, n))
        df = pd.DataFrame(rows)
    df = _canonical_columns(df, uri)
    missing = [c for c in required if c not in df.columns]
    if missing:
        shown = [f"{INPUT_ALIASES[c]} (or {c})" if c in INPUT_ALIASES else c for c in missing]
        raise InputError(f"{uri}: missing required column(s) {shown}; found {list(df.columns)}")
    if "_input_error" not in df.columns:
        df["_input_error"] = None
    return df


def summarize(per_item: pd.DataFrame, aggregates: Iterable[Aggregate], group_cols: list[str], *, unit: str,
              resamples: int = 1000, confidence: float = 0.95, seed: int = 0,
              item_stats: ItemStats = mean_item_stats) -> pd.DataFrame:
    """Long-form summary (group columns, kind, metric, value, ci_low, ci_high, n, definition); ``item_stats``:
    the per-unit statistics (:func:`evalcore.stats.aggregate.aggregate`)."""
    df = per_item.copy()
    by = list(group_cols)
    if not by:
        df["_all"] = "all"
        by = ["_all"]
    rows = aggregate(df, list(aggregates), by, unit=unit, resamples=resamples, confidence=confidence, seed=seed,
                     item_stats=item_stats)
    out = pd.DataFrame(rows, columns=[*by, *SUMMARY_TAIL])
    return out.drop(columns=["_all"], errors="ignore")


def write_outputs(out_dir: str, per_item: pd.DataFrame, summary: pd.DataFrame, report: str | None = None) -> None:
    """``out_dir/per_item.parquet``, ``out_dir/summary.parquet`` and optionally ``out_dir/report.md``."""
    storage.write_parquet(pa.Table.from_pandas(per_item, preserve_index=False), storage.join(out_dir, "per_item.parquet"))
    storage.write_parquet(pa.Table.from_pandas(summary, preserve_index=False), storage.join(out_dir, "summary.parquet"))
    if report is not None:
        storage.write_text(storage.join(out_dir, "report.md"), report)



def quiet_mode(quiet: bool) -> None:
    """``--quiet``: no library progress bars, INFO lines or warnings (:func:`evalcore.reports.console.setup`)."""
    if quiet:
        console.setup(quiet=True)


def say(quiet: bool, *lines: str) -> None:
    """The closing lines of a score command (its counts, what it wrote), on stderr unless ``quiet``."""
    for line in lines if not quiet else ():
        typer.echo(line, err=True)
