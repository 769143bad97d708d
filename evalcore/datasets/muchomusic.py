"""MuChoMusic: multiple-choice questions over MusicCaps and Song Describer clips (released CSV).

Columns: ``question, correct_answer, distractor_1_answer`` (incorrect but related, IR),
``distractor_2_answer`` (correct but unrelated, CU), ``distractor_3_answer`` (incorrect and
unrelated, IU), ``dataset`` (sdd | musiccaps), ``dataset_identifier``, ``genre``,
``music_knowledge``, ``music_reasoning`` (lists stored as strings). Options are kept in the
canonical order correct, IR, CU, IU (the pipeline shuffles them per option order), and
``metadata.option_types`` names each option's type and ``metadata.options_by_type`` maps each type
to its text (which type a response chose, in the report's distractor table).
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from evalcore import storage
from evalcore.datasets.base import Dataset, DatasetContext
from evalcore.datasets.tabular import read_table, string_list, text
from evalcore.registry import DATASETS

DISTRACTORS = {"IR": "distractor_1_answer", "CU": "distractor_2_answer", "IU": "distractor_3_answer"}


@DATASETS.register("muchomusic")
class MuChoMusic(Dataset):
    """``path``: the CSV; ``audio_root`` + ``audio_pattern`` locate each clip; ``distractors`` keeps a
    subset of the distractor types (the paper's distractor ablation)."""

    def __init__(self, path: str, audio_root: str, audio_pattern: str = "{dataset}/{dataset_identifier}.wav",
                 distractors: Sequence[str] = ("IR", "CU", "IU")) -> None:
        unknown = set(distractors) - set(DISTRACTORS)
        if unknown or not distractors:
            raise ValueError(f"distractors must be a non-empty subset of {sorted(DISTRACTORS)}, got {distractors}")
        self.path, self.audio_root, self.audio_pattern = path, audio_root, audio_pattern
        self.distractors = [d for d in DISTRACTORS if d in distractors]

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any]]:
        for i, row in enumerate(read_table(self.path).to_dict("records")):
            yield self._item(i, row)

    def _item(self, i: int, row: dict[str, Any]) -> dict[str, Any]:
        kinds = ["correct", *self.distractors]
        options = [text(row.get("correct_answer")), *(text(row.get(DISTRACTORS[d])) for d in self.distractors)]
        source, ident = text(row.get("dataset")), text(row.get("dataset_identifier"))
        audio = (storage.join(self.audio_root, self.audio_pattern.format(dataset=source, dataset_identifier=ident))
                 if source and ident else None)
        return {
            "item_id": f"q{i:05d}", "protocol": "mcq", "task": "muchomusic", "audio_uri": audio,
            "question": text(row.get("question")), "options": options, "correct_option": 0,
            "category": source,
            "metadata": json.dumps({
                "dataset_identifier": ident, "option_types": kinds,
                "options_by_type": dict(zip(kinds, options)),
                "genre": string_list(row.get("genre")),
                "music_knowledge": string_list(row.get("music_knowledge")),
                "music_reasoning": string_list(row.get("music_reasoning")),
            }),
        }
