"""Items from a file of item rows: JSONL or Parquet with the columns of ``schema.ITEM``."""

from __future__ import annotations

import io
import json
from typing import Any, Iterator

import pyarrow.parquet as pq

from evalcore import storage
from evalcore.datasets.base import Dataset, DatasetContext
from evalcore.registry import DATASETS


class BadLine(str):
    """A line that is not a JSON object; validation turns it into an error row."""


@DATASETS.register("items_file")
class ItemsFile(Dataset):
    """``path``: local path or s3:// URI of a .jsonl/.json (one object per line) or .parquet file.

    ``audio_root``, if given, is prefixed to relative ``audio_uri`` values.
    """

    def __init__(self, path: str, audio_root: str | None = None) -> None:
        self.path = path
        self.audio_root = audio_root

    def items(self, ctx: DatasetContext) -> Iterator[Any]:
        data = storage.read_bytes(self.path)
        if self.path.endswith(".parquet"):
            rows: Iterator[Any] = iter(pq.read_table(io.BytesIO(data)).to_pylist())
        else:
            rows = self._jsonl(data)
        for row in rows:
            if isinstance(row, dict) and self.audio_root and isinstance(row.get("audio_uri"), str):
                uri = row["audio_uri"]
                if "://" not in uri and not uri.startswith("/"):
                    row["audio_uri"] = storage.join(self.audio_root, uri)
            yield row

    @staticmethod
    def _jsonl(data: bytes) -> Iterator[Any]:
        for n, raw in enumerate(data.splitlines(), 1):
            try:  # per line, so one line of another encoding is that line's error, not mangled text
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield BadLine(f"line {n}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})")
                continue
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                yield BadLine(f"line {n}: invalid JSON ({e.msg})")
