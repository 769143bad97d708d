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

from typing import Annotated, Literal, Sequence

from pydantic import Field

from evalcore.datasets.base import DATASETS
from evalcore.datasets.mapped_mcq import FieldMap, MappedMCQ
from evalcore.core.params import PathStr

Modality = Literal["sound", "music", "speech", "mix-sound-music", "mix-sound-speech", "mix-music-speech",
                   "mix-sound-music-speech"]
#: the modalities holding music: the default selection
MUSIC_MODALITIES: tuple[Modality, ...] = ("music", "mix-sound-music", "mix-music-speech", "mix-sound-music-speech")


@DATASETS.register("mmar")
class MMAR(MappedMCQ):
    """``path``: ``MMAR-meta.jsonl`` (or ``MMAR-meta.json``); ``audio_root``: the folder holding ``audio/``, by
    default the metadata's folder; ``modalities``: the ``modality`` values kept (default: those with music)."""

    fields = FieldMap(bench="MMAR", subset="modality", audio="audio_path", item={"category": "category"},
                      metadata={"audio_path": "audio_path", "language": "language", "source": "source",
                                "url": "url", "timestamp": "timestamp"})

    def __init__(self, path: PathStr, audio_root: PathStr | None = None,
                 modalities: Annotated[Sequence[Modality], Field(min_length=1)] = MUSIC_MODALITIES) -> None:
        super().__init__(path, audio_root, modalities)
