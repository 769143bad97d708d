"""Helpers shared by loaders of released CSV/Parquet benchmark files.

:func:`read_rows` reads a released table with the items file's guards (:mod:`evalcore.datasets.records`): a file
that is empty, not a table of its format or without a column the loader reads cannot be read at all
(:class:`~evalcore.datasets.records.FileUnreadable` naming the param: a ``validate`` error, ``check_table``); a CSV
line that does not fit the header is a reason of its own (never skipped silently); bytes that are not UTF-8 are
kept as lone surrogates so that only their row fails (:func:`undecodable`)."""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from evalcore.core import storage
from evalcore.datasets.records import FileUnreadable
from evalcore.core.errors import utf8_error


def read_table(uri: str) -> pd.DataFrame:
    """A CSV or Parquet file (local path or s3://) as a DataFrame of Python objects."""
    data = storage.read_bytes(uri)
    if uri.endswith(".parquet"):
        return pq.read_table(io.BytesIO(data)).to_pandas()
    return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)


def read_rows(uri: str, param: str = "path", columns: tuple[str, ...] = ()) -> tuple[list[dict[str, Any]], list[str]]:
    """(rows, reasons of CSV lines that do not fit the header) of a released CSV or Parquet file; raises
    :class:`FileUnreadable` naming ``param`` when the file cannot be read as a table with ``columns``."""
    data = storage.read_bytes(uri)
    if not data.strip():
        raise FileUnreadable(f"{param}: {uri!r} is empty")
    misfits: list[int] = []
    kind = "Parquet" if uri.endswith(".parquet") else "CSV"
    try:
        if kind == "Parquet":
            df = pq.read_table(io.BytesIO(data)).to_pandas()
        else:
            df = csv_frame(data, misfits)
        rows = df.to_dict("records")
    except (ValueError, OSError, csv.Error, RecursionError) as e:  # pandas' and pyarrow's parse errors are ValueErrors
        raise FileUnreadable(f"{param}: {uri!r} is not a readable {kind} file "
                             f"({type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise FileUnreadable(f"{param}: {uri!r} lacks column(s) {missing}; it has {[str(c) for c in df.columns][:12]}")
    width = len(df.columns)
    problems = [f"{uri}: a CSV line of {n} fields does not fit the header's {width} columns" for n in misfits]
    if kind == "CSV" and rows and not data.endswith(b"\n"):  # a released table ends with a line break
        rows.pop()
        problems.append(f"{uri}: its last line has no line break (the file is cut short?); that row is left out "
                        "as this error")
    return rows, problems


def csv_frame(data: bytes, misfits: list[int], **kwargs: Any) -> pd.DataFrame:
    """A CSV's cells as Python strings: read by pandas' fast parser when the file is clean UTF-8 that fits its
    header; else again line by line (its Python parser), the bytes that are not UTF-8 kept as lone surrogates (only
    their row fails, :func:`undecodable`) and the number of fields of every line that does not fit the header
    appended to ``misfits``."""
    try:
        return pd.read_csv(io.BytesIO(data), dtype=object, keep_default_na=False, **kwargs)
    except (UnicodeDecodeError, pd.errors.ParserError):
        return pd.read_csv(io.StringIO(data.decode("utf-8", "surrogateescape")), dtype=object, keep_default_na=False,
                           engine="python", on_bad_lines=lambda fields: misfits.append(len(fields)),  # type: ignore
                           **kwargs)


def check_table(uri: str, param: str = "path", columns: tuple[str, ...] = ()) -> None:
    """:func:`read_rows` for ``evalcore validate``: FileUnreadable when the file cannot be read as that table."""
    read_rows(uri, param, columns)


def undecodable(row: dict[str, Any]) -> str | None:
    """Why a row read by :func:`read_rows` cannot be an item because of its bytes (a cell that was not UTF-8 in the
    file), or None."""
    for k, v in row.items():
        if isinstance(v, str) and (e := utf8_error(v)) is not None:
            return f"column {str(k)[:40]!r} is not valid UTF-8 text (at character {e.start})"
    return None


def text(v: Any) -> str | None:
    """A cell as text, or None when empty/missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    s = str(v).strip()
    return s or None


def number(v: Any) -> float | None:
    """A cell as a float, or None when empty; a non-number is returned as-is so validation reports it."""
    t = text(v)
    if t is None:
        return None
    try:
        return float(t)
    except ValueError:
        return v


def seconds(v: Any) -> float | None:
    """A time cell as seconds: a number, a numeric string ("12.5") or a clock string ("1:05", "0:01:05.5");
    None when empty; anything else is returned as-is so validation reports it."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return None if isinstance(v, float) and math.isnan(v) else float(v)
    t = text(v)
    if t is None:
        return None
    parts = t.split(":")
    if 1 < len(parts) <= 3:
        try:
            whole = [float(p) for p in parts]
        except ValueError:
            return v
        if all(p >= 0 for p in whole) and all(p < 60 for p in whole[1:]):
            return sum(p * 60 ** k for k, p in enumerate(reversed(whole)))
        return v
    return number(t)


def string_list(v: Any) -> list[str]:
    """A list cell stored as a string ("['a', 'b']", '["a"]' or "a, b") or as a real list."""
    if isinstance(v, (list, tuple)) or hasattr(v, "tolist"):
        return [str(x) for x in list(v)]
    t = text(v)
    if t is None:
        return []
    for parse in (json.loads, ast.literal_eval):
        try:
            out = parse(t)
        except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):  # a cell nested too deeply, say
            continue
        if isinstance(out, (list, tuple)):
            return [str(x) for x in out]
        return [str(out)]
    return [p.strip() for p in t.split(",") if p.strip()]
