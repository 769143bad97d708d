"""The run's valid items as one Arrow table (:data:`evalcore.core.schema.ITEM`): columnar in the driver, rows as dicts
only a slice at a time.

A million-request run has about 125,000 items; as Python dicts they took about 3 KB each in the driver, as
Arrow columns a few hundred bytes. Every stage that reads items iterates them (:meth:`ItemTable.__iter__`) or
takes slices (a read task's share, :func:`evalcore.pipeline.sources.request_source`), and gets the same dicts
a committed run reads back: items are conformed to the schema once, when read.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence, overload

import pyarrow as pa

from evalcore.core.schema import ITEM, conform

SLICE_ROWS = 4096  # rows turned into dicts at a time


class ItemTable(Sequence[dict]):
    """A sequence of item dicts backed by an Arrow table of :data:`ITEM`; slices are tables too."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    @classmethod
    def from_rows(cls, rows: Iterable[dict]) -> "ItemTable":
        """Items (dicts of the schema's fields) as a table."""
        return cls(conform(list(rows), ITEM))

    @classmethod
    def concat(cls, parts: Sequence["ItemTable"]) -> "ItemTable":
        """The items of ``parts``, in order."""
        return cls(pa.concat_tables([p.table for p in parts]) if parts else ITEM.empty_table())

    def __len__(self) -> int:
        return self.table.num_rows

    @overload
    def __getitem__(self, i: int) -> dict: ...

    @overload
    def __getitem__(self, i: slice) -> "ItemTable": ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("ItemTable slices take no step")
            return ItemTable(self.table.slice(start, max(0, stop - start)))
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        return self.table.slice(i % n, 1).to_pylist()[0]

    def __iter__(self) -> Iterator[dict]:
        for rows in self.chunks():
            yield from rows

    def chunks(self, rows: int = SLICE_ROWS) -> Iterator[list[dict]]:
        """The items as lists of at most ``rows`` dicts, in order."""
        for a in range(0, len(self), rows):
            yield self.table.slice(a, rows).to_pylist()

    def __reduce__(self):
        # an Arrow IPC stream holds only the rows of a slice (pickling a sliced table may carry its parent's buffers)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.table.schema) as w:
            w.write_table(self.table)
        return _from_ipc, (sink.getvalue(),)


def _from_ipc(buf: pa.Buffer) -> ItemTable:
    return ItemTable(pa.ipc.open_stream(buf).read_all())
