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

from typing import Annotated, Literal, Sequence

from pydantic import Field

from evalcore.datasets.base import DATASETS
from evalcore.datasets.mapped_mcq import FieldMap, MappedMCQ
from evalcore.core.params import PathStr

Task = Literal["music", "sound", "speech"]


@DATASETS.register("mmau")
class MMAU(MappedMCQ):
    """``path``: the released JSON (test-mini or test); ``audio_root``: the folder holding ``test-mini-audios/``
    (or ``test-audios/``), by default the JSON's folder; ``tasks``: the ``task`` values kept (default music)."""

    fields = FieldMap(bench="MMAU", subset="task", audio="audio_id",
                      item={"category": "category", "difficulty": "difficulty"},
                      metadata={"audio_id": "audio_id", "source": "dataset", "split": "split"})

    def __init__(self, path: PathStr, audio_root: PathStr | None = None,
                 tasks: Annotated[Sequence[Task], Field(min_length=1)] = ("music",)) -> None:
        super().__init__(path, audio_root, tasks)
