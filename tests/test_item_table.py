"""ItemTable: the run's items as an Arrow table that reads as a sequence of the committed item dicts."""

from __future__ import annotations

import pickle

import pytest

from evalcore.core.item_table import ItemTable
from evalcore.core.schema import ITEM, conform


def _rows(n: int) -> list[dict]:
    return [{"dataset": "d", "item_id": f"q{i:05d}", "protocol": "mcq" if i % 3 else "freeform", "task": "t",
             "audio_uri": f"/a/clip{i % 7}.wav", "question": f"question {i} " + "x" * 200, "reference": None,
             "options": ["a", "b", "c"] if i % 3 else None, "correct_option": 1 if i % 3 else None,
             "excerpt_start": 1.5 if i % 2 else None, "metadata": '{"k": 1}' if i % 5 == 0 else None}
            for i in range(n)]


def test_items_read_back_as_the_committed_dicts_in_order_whole_or_sliced():
    rows = _rows(10_000)
    want = conform(rows, ITEM).to_pylist()  # what a committed run reads back
    items = ItemTable.from_rows(rows)
    assert len(items) == 10_000 and list(items) == want
    assert items[0] == want[0] and items[-1] == want[-1] and items[4097] == want[4097]
    part = items[4000:4100]
    assert isinstance(part, ItemTable) and list(part) == want[4000:4100]
    assert list(items[9990:20_000]) == want[9990:] and len(items[5:5]) == 0
    assert [len(c) for c in items.chunks(4096)] == [4096, 4096, 1808]
    assert list(ItemTable.concat([items[:10], items[10:25]])) == want[:25]
    with pytest.raises(IndexError):
        items[10_000]


def test_a_pickled_slice_carries_its_rows_only():
    items = ItemTable.from_rows(_rows(10_000))
    part = items[100:200]
    data = pickle.dumps(part)
    assert list(pickle.loads(data)) == list(part)
    assert len(data) < len(pickle.dumps(items)) / 50  # not the parent table's buffers
