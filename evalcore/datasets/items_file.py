"""Items from a file of item rows: JSONL or Parquet with the columns of ``schema.ITEM`` (less ``dataset``,
which the run config names)."""

from __future__ import annotations

import io
import json
from typing import Any, Iterator

import pyarrow.parquet as pq

from evalcore import jsonl, storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.params import PathStr


@DATASETS.register("items_file")
class ItemsFile(Dataset):
    """``path``: local path or s3:// URI of a .jsonl/.json (one object per line) or .parquet file.

    A relative ``audio_uri`` is resolved against ``audio_root`` when given, else against the directory of
    the items file (``../audio/a.wav`` next to ``items/items.jsonl`` is ``audio/a.wav``), into an absolute
    path or URI here, on the driver: workers never resolve paths against their own working directory.
    """
    path_params = {"path": "file", "audio_root": "dir"}  # must exist (evalcore validate)

    def __init__(self, path: PathStr, audio_root: PathStr | None = None) -> None:
        self.path = path
        self.audio_root = audio_root

    def audio_base(self) -> str:
        """What relative ``audio_uri`` values are relative to: ``audio_root``, else the items file's directory."""
        return storage.absolute(self.audio_root) if self.audio_root else storage.parent(storage.absolute(self.path))

    def items(self, ctx: DatasetContext) -> Iterator[Any]:
        data = storage.read_bytes(self.path)
        if self.path.endswith(".parquet"):
            rows: Iterator[Any] = iter(pq.read_table(io.BytesIO(data)).to_pylist())
        else:
            rows = self._jsonl(data)
        base = self.audio_base()
        for row in rows:
            if isinstance(row, dict) and isinstance(row.get("audio_uri"), str) and row["audio_uri"]:
                try:
                    row["audio_uri"] = storage.absolute(row["audio_uri"], base)
                except ValueError:
                    pass  # left as written: reading it fails as that row's error
            yield row

    @staticmethod
    def _jsonl(data: bytes) -> Iterator[Any]:
        for n, raw in jsonl.lines(data):
            try:  # per line, so one line of another encoding is that line's error, not mangled text
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield BadItem(f"line {n}: not valid UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start})")
                continue
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as e:
                yield BadItem(f"line {n}: invalid JSON ({e.msg})")
            except RecursionError:
                yield BadItem(f"line {n}: invalid JSON (nested too deeply)")
            except ValueError as e:  # e.g. an integer of more than 4,300 digits
                yield BadItem(f"line {n}: invalid JSON ({str(e).split(':')[0]})")
