"""Helpers shared by loaders of released CSV/Parquet benchmark files."""

from __future__ import annotations

import ast
import io
import json
import math
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from evalcore import storage


def read_table(uri: str) -> pd.DataFrame:
    """A CSV or Parquet file (local path or s3://) as a DataFrame of Python objects."""
    data = storage.read_bytes(uri)
    if uri.endswith(".parquet"):
        return pq.read_table(io.BytesIO(data)).to_pandas()
    return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)


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
        except (ValueError, SyntaxError):
            continue
        if isinstance(out, (list, tuple)):
            return [str(x) for x in out]
        return [str(out)]
    return [p.strip() for p in t.split(",") if p.strip()]
