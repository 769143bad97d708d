"""Items from a file of item rows: JSONL or Parquet with the columns of ``schema.ITEM`` (less ``dataset``,
which the run config names)."""

from __future__ import annotations

import io
import json
from typing import Any, Iterator

import pyarrow.parquet as pq

from evalcore.core import jsonl, storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.core.params import PathStr


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
        return self.base_of(self.path, self.audio_root)

    @staticmethod
    def base_of(path: str, audio_root: str | None = None) -> str:
        """:meth:`audio_base` from the params alone."""
        return storage.absolute(audio_root) if audio_root else storage.parent(storage.absolute(path))

    @staticmethod
    def rows_of(path: str) -> Iterator[Any]:
        """The file's rows as written (a line that is not a JSON object is a :class:`BadLine`)."""
        data = storage.read_bytes(path)
        if path.endswith(".parquet"):
            return iter(pq.read_table(io.BytesIO(data)).to_pylist())
        return ItemsFile._jsonl(data)

    @classmethod
    def audio_uris(cls, params: dict[str, Any]) -> Iterator[tuple[int, Any, str]]:
        """(row number from 1, item_id, absolute audio URI) of every row of the file ``params`` name that names
        its audio, read from the params alone, nothing built (``evalcore validate`` checks that each exists; a
        run makes a missing one that row's error)."""
        base = cls.base_of(params["path"], params.get("audio_root"))
        for n, row in enumerate(cls.rows_of(params["path"]), start=1):
            if isinstance(row, dict) and isinstance(row.get("audio_uri"), str) and row["audio_uri"]:
                try:
                    yield n, row.get("item_id"), storage.absolute(row["audio_uri"], base)
                except ValueError:
                    continue  # not a usable URI: reading the items makes it that row's error

    def items(self, ctx: DatasetContext) -> Iterator[Any]:
        base = self.audio_base()
        for row in self.rows_of(self.path):
            if isinstance(row, dict) and isinstance(row.get("audio_uri"), str) and row["audio_uri"]:
                try:
                    row["audio_uri"] = storage.absolute(row["audio_uri"], base)
                except ValueError:
                    pass  # left as written: reading it fails as that row's error
            yield row

    def write_subset(self, item_ids: set[str], out: str) -> int | None:
        """The file's rows of ``item_ids`` as JSON Lines, each ``audio_uri`` made absolute (so the subset reads back
        from wherever it is written)."""
        kept = [row for row in self.items(DatasetContext("subset", "", 0))
                if isinstance(row, dict) and row.get("item_id") in item_ids]
        storage.write_text(out, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in kept))
        return len(kept)

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
