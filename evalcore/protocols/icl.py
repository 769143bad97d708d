"""In-context examples for multiple-choice prompts (text only, with their answers).

The pool of an item is every other multiple-choice item of its dataset (never the item itself,
nor an item asking the same question with the same options). ``k`` examples are drawn without
replacement by a generator seeded with (seed, dataset, item id), from the pool sorted by item id,
so the draw does not depend on the order items were read in, and every model, condition and
option order of the item sees the same examples. Each example's options are shuffled by its own
seeded permutation (so its answer is not always A); the example carries its correct index in
that presented order.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from evalcore.seeding import rng

__all__ = ["MAX_EXAMPLES", "Example", "IclPools", "draw_examples"]

MAX_EXAMPLES = 5


@dataclass(frozen=True)
class Example:
    item_id: str
    question: str
    options: tuple[str, ...]  # presented order
    correct_index: int

    def as_tuple(self) -> tuple[str, Sequence[str], int]:
        return self.question, self.options, self.correct_index


def _usable(it: dict) -> bool:
    opts = it.get("options") or []
    c = it.get("correct_option")
    return it.get("protocol") == "mcq" and len(opts) >= 2 and isinstance(c, int) and 0 <= c < len(opts)


class IclPools:
    """The per-dataset example pools of a list of items."""

    def __init__(self, items: Iterable[dict]) -> None:
        pools: dict[str, list[dict]] = defaultdict(list)
        for it in items:
            if _usable(it):
                pools[it["dataset"]].append(it)
        self.pools = {ds: sorted(p, key=lambda it: str(it["item_id"])) for ds, p in pools.items()}

    def pool(self, item: dict) -> list[dict]:
        """The candidates for ``item``: its dataset's items except itself and its duplicates."""
        key = (item.get("question"), tuple(item.get("options") or ()))
        return [it for it in self.pools.get(item["dataset"], [])
                if it["item_id"] != item["item_id"] and (it.get("question"), tuple(it["options"])) != key]

    def examples(self, item: dict, k: int, seed: int) -> list[Example]:
        """``k`` examples for ``item``; ValueError when its pool holds fewer than ``k``."""
        return draw_examples(item, self.pool(item), k, seed)


def draw_examples(item: dict, pool: Sequence[dict], k: int, seed: int) -> list[Example]:
    """``k`` seeded examples for ``item`` from ``pool`` (which must not contain the item)."""
    if not 0 <= k <= MAX_EXAMPLES:
        raise ValueError(f"in-context examples must be between 0 and {MAX_EXAMPLES}, got {k}")
    if k == 0:
        return []
    if any(p["item_id"] == item["item_id"] for p in pool):
        raise ValueError(f"the example pool of {item['item_id']!r} contains the item itself")
    if len(pool) < k:
        raise ValueError(f"icl: {k} in-context example(s) asked but dataset {item['dataset']!r} has only "
                         f"{len(pool)} other multiple-choice item(s)")
    picks = rng("icl", seed, item["dataset"], item["item_id"]).choice(len(pool), size=k, replace=False)
    out = []
    for j in picks:
        ex = pool[int(j)]
        perm = [int(i) for i in rng("icl-options", seed, ex["dataset"], item["item_id"], ex["item_id"])
                .permutation(len(ex["options"]))]
        out.append(Example(item_id=ex["item_id"], question=ex.get("question") or "",
                           options=tuple(ex["options"][i] for i in perm),
                           correct_index=perm.index(ex["correct_option"])))
    return out
