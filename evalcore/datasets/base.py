"""The dataset interface: a source of item rows (see ``evalcore.schema.ITEM``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass(frozen=True)
class DatasetContext:
    """What a dataset may need from the run: where the run writes, and its seed."""

    name: str  # the dataset's name in the config; goes into the ``dataset`` column
    run_root: str  # the run's storage root (local path or s3:// URI)
    seed: int


class Dataset(ABC):
    """Yields item dicts; malformed rows are allowed and become error rows downstream."""

    @abstractmethod
    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any]]:
        """Item rows with the fields of ``evalcore.schema.ITEM`` (``dataset`` may be omitted)."""
