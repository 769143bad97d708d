"""In-context examples for multiple-choice prompts (text only, with their answers).

The pool of an item is every other multiple-choice item of its dataset (never the item itself,
nor an item asking the same question with the same options). ``k`` examples are drawn without
replacement by a generator seeded with (seed, dataset, item id), from the pool sorted by item id,
so the draw does not depend on the order items were read in, and every model, condition and
option order of the item sees the same examples. Each example's options are shuffled by its own
seeded permutation (so its answer is not always A); the example carries its correct index in
that presented order.

:meth:`IclPools.fixed` is MuChoMusic's rule instead (``icl_pool: released``). Its released code draws
nothing: ``prepare_prompts.py`` puts the one list ``in_context_examples`` of its config, in that order,
before every question, and the released config holds a single example. So a k-shot prompt here is the
first k of one fixed list per dataset: the released example first, then the dataset's questions in one
seeded order (seed, dataset), the same for every question; an item never sees itself (nor a question
with its own text and options, nor one repeating the lead) — for that item the list skips to the next.
Each listed question's options are shuffled once, by its own seeded permutation.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

from evalcore.kinds.base import kind_of
from evalcore.core.seeding import rng

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
    kind = kind_of(it.get("protocol"))
    return kind is not None and kind.in_context and len(opts) >= 2 and isinstance(c, int) and 0 <= c < len(opts)


class IclPools:
    """The per-dataset example pools of a list of items."""

    def __init__(self, items: Iterable[dict]) -> None:
        pools: dict[str, list[dict]] = defaultdict(list)
        for it in items:
            if _usable(it):
                pools[it["dataset"]].append(it)
        self.pools = {ds: sorted(p, key=lambda it: str(it["item_id"])) for ds, p in pools.items()}
        self._fixed: dict[tuple[str, int], list[Example]] = {}

    def pool(self, item: dict) -> list[dict]:
        """The candidates for ``item``: its dataset's items except itself and its duplicates."""
        key = (item.get("question"), tuple(item.get("options") or ()))
        return [it for it in self.pools.get(item["dataset"], [])
                if it["item_id"] != item["item_id"] and (it.get("question"), tuple(it["options"])) != key]

    def examples(self, item: dict, k: int, seed: int) -> list[Example]:
        """``k`` examples for ``item``; ValueError when its pool holds fewer than ``k``."""
        return draw_examples(item, self.pool(item), k, seed)

    def fixed(self, item: dict, k: int, seed: int, lead: Example) -> list[Example]:
        """The first ``k`` of the dataset's one fixed list (``lead``, then its questions in one seeded order),
        skipping ``item`` itself and repeats of it or of ``lead``; ValueError when too few remain."""
        if not 0 <= k <= MAX_EXAMPLES:
            raise ValueError(f"in-context examples must be between 0 and {MAX_EXAMPLES}, got {k}")
        if k == 0:
            return []
        out = [lead]
        skip = {_key(item.get("question") or "", item.get("options") or ()), _key(lead.question, lead.options)}
        for ex in self._fixed_order(item["dataset"], seed):
            if len(out) == k:
                break
            if ex.item_id != item["item_id"] and _key(ex.question, ex.options) not in skip:
                out.append(ex)
        if len(out) < k:
            raise ValueError(f"icl: {k} in-context example(s) asked but dataset {item['dataset']!r} has only "
                             f"{len(out) - 1} other multiple-choice item(s) besides the released example")
        return out

    def _fixed_order(self, dataset: str, seed: int) -> list[Example]:
        """The dataset's questions in their one seeded order, options shuffled once each (cached per seed)."""
        if (dataset, seed) not in self._fixed:
            pool = self.pools.get(dataset, [])
            order = rng("icl-fixed", seed, dataset).permutation(len(pool))
            self._fixed[(dataset, seed)] = [_shuffled(pool[int(j)], seed, "fixed") for j in order]
        return self._fixed[(dataset, seed)]


def _key(question: str, options: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """A question with its options in any order (what makes two questions the same)."""
    return question, tuple(sorted(options))


def _shuffled(ex: dict, seed: int, *where: str) -> Example:
    """``ex`` as an example whose options are in their own seeded order (``where`` keys that order)."""
    perm = [int(i) for i in rng("icl-options", seed, ex["dataset"], *where, ex["item_id"])
            .permutation(len(ex["options"]))]
    return Example(item_id=ex["item_id"], question=ex.get("question") or "",
                   options=tuple(ex["options"][i] for i in perm), correct_index=perm.index(ex["correct_option"]))


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
    return [_shuffled(pool[int(j)], seed, item["item_id"]) for j in picks]
