"""The dataset interface: a source of item rows (see ``evalcore.core.schema.ITEM``), the error row a dataset yields in
place of a record that cannot be an item (:class:`BadItem`), and the datasets' registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from evalcore.core.registry import Registry


@dataclass(frozen=True)
class DatasetContext:
    """What a dataset may need from the run: where the run writes, and its seed."""

    name: str  # the dataset's name in the config; goes into the ``dataset`` column
    run_root: str  # the run's storage root (local path or s3:// URI)
    seed: int


@dataclass(frozen=True)
class BadItem:
    """A record that cannot be an item, yielded in its place with the reason (one line, no payload): validation
    makes it an error row of the ``load`` stage (:func:`evalcore.datasets.validate.validated`), so nothing is
    dropped silently."""

    reason: str


@dataclass(frozen=True)
class FactualVocabulary:
    """What a dataset's factual items are labelled with, known from its config params alone: task → the name
    of its lexicon (``evalcore.vocab.lexicon.LEXICONS``), and the genre tree file of its genre tasks."""

    tasks: Mapping[str, str] = field(default_factory=dict)
    tree: str | None = None


class Dataset(ABC):
    """Yields item dicts, and a :class:`BadItem` for a record it cannot read; malformed dicts are allowed too and
    become error rows downstream."""

    @abstractmethod
    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        """Item rows with the fields of ``evalcore.core.schema.ITEM`` but ``dataset`` (the run sets it from the config),
        and a :class:`BadItem` in place of each record that cannot be one."""

    def write_subset(self, item_ids: set[str], out: str) -> int | None:
        """Write the released records of the items ``item_ids`` to ``out`` in this dataset's own format (as
        released, in their order), so its own loader reads them back; the number of records written, or None when
        the dataset has no released format of its own (``evalcore subset`` then writes the item rows as JSONL, which
        ``items_file`` reads)."""
        return None

    @classmethod
    def factual_vocabulary(cls, params: Mapping[str, Any]) -> FactualVocabulary:
        """The vocabulary of the factual tasks this dataset's config produces (none by default: the
        dataset has no factual items, or they are only known once read)."""
        return FactualVocabulary()


#: the datasets by kind: ``@DATASETS.register("kind")`` on a :class:`Dataset`; loads this package's modules on first use
DATASETS: Registry[Dataset] = Registry("dataset", __package__ or "evalcore.datasets")
