"""MMAU (Sakshi et al., 2024, arXiv 2410.19168): audio multiple-choice questions over speech, sound and music;
evalcore keeps the music subset by the file's own ``task`` field.

Reads the released JSON unrenamed (github.com/Sakshi113/MMAU: ``mmau-test-mini.json``, 1,000 questions of which
334 are ``task: music``; ``mmau-test.json``, 9,000 questions whose answers are withheld): a list of records with
``id``, ``audio_id`` (``./test-mini-audios/<id>.wav`` or ``./test-audios/<id>.wav``, relative to the folder the
released audio archive is extracted in), ``question``, ``choices`` (four texts), ``answer`` (one of the choice
texts; ``""`` in the test split), ``dataset`` (the clip's source), ``task`` (sound | music | speech), ``split``,
``category`` (Information Extraction | Reasoning), ``sub-category`` and ``difficulty`` (easy | medium | hard).

Item rows: ``item_id`` = ``id``; ``task`` = the record's task; ``category`` and ``difficulty`` as released;
``metadata.secondary_categories`` = [sub-category] (the report's per-sub-category breakdown, as the published
scorer prints one). A test-split record has no answer, so it is an error row saying so: its answers are scored
only by the benchmark's own server. A record whose answer is not one of its choices, or whose choices repeat
(one test-mini music item lists "1.63 seconds" twice), is an error row too.
"""

from __future__ import annotations

from typing import Annotated, Any, Iterator, Literal, Sequence

from pydantic import Field

from evalcore import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.released_mcq import (audio_uri, check_records, mcq_item, read_records, record_problem,
                                            subset_problem)
from evalcore.params import PathStr

Task = Literal["music", "sound", "speech"]


@DATASETS.register("mmau")
class MMAU(Dataset):
    """``path``: the released JSON (test-mini or test); ``audio_root``: the folder holding ``test-mini-audios/``
    (or ``test-audios/``), by default the JSON's folder; ``tasks``: the ``task`` values kept (default music)."""

    path_params = {"path": "file", "audio_root": "dir"}  # must exist (evalcore validate)

    def __init__(self, path: PathStr, audio_root: PathStr | None = None,
                 tasks: Annotated[Sequence[Task], Field(min_length=1)] = ("music",)) -> None:
        self.path, self.audio_root, self.tasks = path, audio_root, tuple(tasks)

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The released file reads as records (``evalcore validate``): empty, not JSON or cut short is ``path``'s
        error (one unreadable record is that record's error row)."""
        check_records(str(params["path"]))

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        root = self.audio_root or storage.parent(self.path)
        for rec in read_records(self.path):
            if (problem := record_problem("MMAU", rec)) is not None:
                yield problem
                continue
            if (problem := subset_problem("MMAU", rec, "task")) is not None:
                yield problem  # a record that cannot be placed in or out of the subset: counted, never dropped
                continue
            if rec.get("task") not in self.tasks:
                continue  # the subset is chosen by the file's own task field
            sub = rec.get("sub-category")
            yield mcq_item("MMAU", rec.get("id"), rec.get("question"), rec.get("choices"), rec.get("answer"),
                           audio_uri(root, rec.get("audio_id")), task=rec.get("task"),
                           category=rec.get("category"), difficulty=rec.get("difficulty"),
                           metadata={"audio_id": rec.get("audio_id"), "source": rec.get("dataset"),
                                     "split": rec.get("split"),
                                     "secondary_categories": [sub] if isinstance(sub, str) else []})
