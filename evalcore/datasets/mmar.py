"""MMAR (Ma et al., NeurIPS 2025, arXiv 2505.13032): deep-reasoning multiple-choice questions over speech, sound,
music and their mixes; evalcore keeps the music-related ones by the file's own ``modality`` field.

Reads the released metadata unrenamed (github.com/ddlBoJack/MMAR): ``MMAR-meta.jsonl`` (one record a line, the
current release) or the earlier ``MMAR-meta.json`` (a list of the same records). A record has ``id``,
``audio_path`` (``./audio/<id>.wav``, relative to the folder the released ``mmar-audio.tar.gz`` is extracted
in), ``question``, ``choices`` (2 to 6 texts; a few hold an empty ``""``), ``answer`` (one choice text),
``modality`` (sound | music | speech | mix-sound-music | mix-sound-speech | mix-music-speech |
mix-sound-music-speech), ``category`` (Signal | Perception | Semantic | Cultural Layer), ``sub-category``,
``language``, ``source``, ``url``, ``timestamp`` and, in the jsonl, ``thinking``, ``cue`` and ``rubric``.

``modalities`` picks the records (default: every modality with music — music, mix-sound-music,
mix-music-speech, mix-sound-music-speech: 323 of the 1,000 questions). Item rows: ``item_id`` = ``id``;
``task`` = the modality (the report's per-task rows are the published per-modality accuracies); ``category``
= the layer; ``metadata.secondary_categories`` = [sub-category]. Empty choices are left out of the options
(:mod:`evalcore.datasets.released_mcq`).
"""

from __future__ import annotations

from typing import Annotated, Any, Iterator, Literal, Sequence

from pydantic import Field

from evalcore import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.released_mcq import (audio_uri, check_records, mcq_item, read_records, record_problem,
                                            subset_problem)
from evalcore.params import PathStr

Modality = Literal["sound", "music", "speech", "mix-sound-music", "mix-sound-speech", "mix-music-speech",
                   "mix-sound-music-speech"]
#: the modalities holding music: the default selection
MUSIC_MODALITIES: tuple[Modality, ...] = ("music", "mix-sound-music", "mix-music-speech", "mix-sound-music-speech")


@DATASETS.register("mmar")
class MMAR(Dataset):
    """``path``: ``MMAR-meta.jsonl`` (or ``MMAR-meta.json``); ``audio_root``: the folder holding ``audio/``, by
    default the metadata's folder; ``modalities``: the ``modality`` values kept (default: those with music)."""

    path_params = {"path": "file", "audio_root": "dir"}  # must exist (evalcore validate)

    def __init__(self, path: PathStr, audio_root: PathStr | None = None,
                 modalities: Annotated[Sequence[Modality], Field(min_length=1)] = MUSIC_MODALITIES) -> None:
        self.path, self.audio_root, self.modalities = path, audio_root, tuple(modalities)

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The released file reads as records (``evalcore validate``): empty, not JSON or cut short is ``path``'s
        error (one unreadable record is that record's error row)."""
        check_records(str(params["path"]))

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        root = self.audio_root or storage.parent(self.path)
        for rec in read_records(self.path):
            if (problem := record_problem("MMAR", rec)) is not None:
                yield problem
                continue
            if (problem := subset_problem("MMAR", rec, "modality")) is not None:
                yield problem  # a record that cannot be placed in or out of the subset: counted, never dropped
                continue
            if rec.get("modality") not in self.modalities:
                continue  # the subset is chosen by the file's own modality field
            sub = rec.get("sub-category")
            yield mcq_item("MMAR", rec.get("id"), rec.get("question"), rec.get("choices"), rec.get("answer"),
                           audio_uri(root, rec.get("audio_path")), task=rec.get("modality"),
                           category=rec.get("category"),
                           metadata={"audio_path": rec.get("audio_path"), "language": rec.get("language"),
                                     "source": rec.get("source"), "url": rec.get("url"),
                                     "timestamp": rec.get("timestamp"),
                                     "secondary_categories": [sub] if isinstance(sub, str) else []})
