"""One loader for released MCQ files that differ only in their field names (MMAU, MMAR): a :class:`FieldMap` says
where a file keeps each part of an item, as lm-evaluation-harness's task YAMLs map a released file's fields onto
one loader; a benchmark's module is its field map, its subset param and its registration.

The rule, for every record of the file (:func:`~evalcore.datasets.released_mcq.read_records`, a JSON list or JSON
Lines):

1. a line that cannot be read, or a record that is not an object, is an error row;
2. a record whose subset field is missing or not text is an error row (it cannot be placed in or out of the
   subset: counted, never dropped);
3. a record whose subset field is not among the configured values is left out (the subset is chosen by the file's
   own field);
4. the rest become MCQ items (:func:`~evalcore.datasets.released_mcq.mcq_item`): ``task`` = the subset field,
   the mapped item fields and metadata as released, ``metadata.secondary_categories`` = [sub-category] (empty
   when the record's is not text).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping, Sequence

from evalcore.core import storage
from evalcore.datasets.base import BadItem, Dataset, DatasetContext
from evalcore.datasets.released_mcq import (audio_uri, check_records, mcq_item, read_records, record_problem,
                                            subset_problem)


@dataclass(frozen=True)
class FieldMap:
    """Where a released file keeps each part of an MCQ item (record field names, unrenamed)."""

    bench: str  # the benchmark's name, as error rows say it
    subset: str  # the field the subset is chosen by; also the item's ``task``
    audio: str  # the audio path, relative to ``audio_root``
    item: Mapping[str, str] = field(default_factory=dict)  # further item field → record field (category, …)
    metadata: Mapping[str, str] = field(default_factory=dict)  # metadata key → record field, in this order
    id: str = "id"
    question: str = "question"
    choices: str = "choices"
    answer: str = "answer"
    sub_category: str = "sub-category"  # → ``metadata.secondary_categories``


class MappedMCQ(Dataset):
    """A released MCQ file read through the class's ``fields``; ``path``: the file; ``audio_root``: the folder its
    audio paths are relative to (by default the file's folder); ``keep``: the subset values kept. A subclass
    declares its params by its constructor (the subset param's name and values are the benchmark's own)."""

    fields: ClassVar[FieldMap]
    path_params = {"path": "file", "audio_root": "dir"}  # must exist (evalcore validate)

    def __init__(self, path: str, audio_root: str | None, keep: Sequence[str]) -> None:
        self.path, self.audio_root, self.keep = path, audio_root, tuple(keep)

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The released file reads as records (``evalcore validate``): empty, not JSON or cut short is ``path``'s
        error (one unreadable record is that record's error row)."""
        check_records(str(params["path"]))

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        f, root = self.fields, self.audio_root or storage.parent(self.path)
        for rec in read_records(self.path):
            if (problem := record_problem(f.bench, rec)) is not None:
                yield problem
                continue
            if (problem := subset_problem(f.bench, rec, f.subset)) is not None:
                yield problem  # a record that cannot be placed in or out of the subset: counted, never dropped
                continue
            if rec.get(f.subset) not in self.keep:
                continue  # the subset is chosen by the file's own field
            sub = rec.get(f.sub_category)
            meta = {key: rec.get(name) for key, name in f.metadata.items()}
            yield mcq_item(f.bench, rec.get(f.id), rec.get(f.question), rec.get(f.choices), rec.get(f.answer),
                           audio_uri(root, rec.get(f.audio)), task=rec.get(f.subset),
                           **{key: rec.get(name) for key, name in f.item.items()},
                           metadata={**meta, "secondary_categories": [sub] if isinstance(sub, str) else []})

    def write_subset(self, item_ids: set[str], out: str) -> int | None:
        """The released records of ``item_ids`` (by the file's id field), as a JSON array or JSON Lines like the
        released file; audio paths stay relative to ``audio_root``, so the subset reads back with the same one."""
        key = self.fields.id
        kept = [rec for rec in read_records(self.path)
                if isinstance(rec, dict) and isinstance(rec.get(key), str) and rec[key] in item_ids]
        array = storage.read_bytes(self.path).lstrip().startswith(b"[")
        text = (json.dumps(kept, ensure_ascii=False, indent=1) if array
                else "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
        storage.write_text(out, text)
        return len(kept)
