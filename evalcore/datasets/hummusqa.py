"""HumMusQA: expert-written multiple-choice questions on excerpts of Jamendo tracks.

Reads the published Parquet (features ``identifier, audio, question, answer, distractor_1..3,
main_category, secondary_categories, difficulty, excerpt_start_time, excerpt_end_time,
jamendo_id``, plus song and license columns; ``audio`` is the Hugging Face audio struct with the
file's bytes, which are written once under the run root) or the CSV release (same columns without
``audio``; clips found under ``audio_root`` by ``audio_pattern``). As released, every column but
``audio`` is a string: excerpt times ("30", "30.5", or a clock time "1:05") are read as seconds and
``secondary_categories`` as a list ("['Harmony']", a JSON list or "Harmony, Melody"). Excerpts are cut
by start/end time.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterator

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.records import outside_root
from evalcore.datasets.tabular import check_table, read_rows, seconds, string_list, text, undecodable

#: the columns the loader reads (the released Parquet and CSV have them all)
COLUMNS = ("identifier", "question", "answer", "distractor_1", "distractor_2", "distractor_3")
from evalcore.core.params import PathStr


@DATASETS.register("hummusqa")
class HumMusQA(Dataset):
    path_params = {"path": "file", "audio_root": "dir"}  # must exist (evalcore validate)
    def __init__(self, path: PathStr, audio_root: PathStr | None = None, audio_pattern: PathStr = "{jamendo_id}.mp3",
                 audio_dir: PathStr | None = None) -> None:
        self.path, self.audio_root, self.audio_pattern, self.audio_dir = path, audio_root, audio_pattern, audio_dir

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The released file reads as a table with the columns the loader reads (``evalcore validate``)."""
        check_table(str(params["path"]), "path", COLUMNS)

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        audio_dir = self.audio_dir or storage.join(ctx.run_root, "dataset_audio", ctx.name)
        rows, misfits = read_rows(self.path, "path", COLUMNS)
        yield from map(BadItem, misfits)  # lines that do not fit the header: counted, never skipped
        for i, row in enumerate(rows):
            if (problem := undecodable({k: v for k, v in row.items() if k != "audio"})) is not None:
                yield BadItem(f"HumMusQA row {i}: {problem}")
                continue
            audio = self._audio(row, audio_dir)
            if audio is not None and audio.startswith("outside:"):
                yield BadItem(f"HumMusQA row {i}: {audio.removeprefix('outside: ')}")
                continue
            yield {
                "item_id": text(row.get("identifier")) or f"row{i:05d}", "protocol": "mcq", "task": "hummusqa",
                "audio_uri": audio,
                "excerpt_start": seconds(row.get("excerpt_start_time")),
                "excerpt_end": seconds(row.get("excerpt_end_time")),
                "question": text(row.get("question")),
                "options": [text(row.get(k)) for k in ("answer", "distractor_1", "distractor_2", "distractor_3")],
                "correct_option": 0,
                "category": text(row.get("main_category")), "difficulty": text(row.get("difficulty")),
                "metadata": json.dumps({"jamendo_id": text(row.get("jamendo_id")),
                                        "secondary_categories": string_list(row.get("secondary_categories"))}),
            }

    def _audio(self, row: dict[str, Any], audio_dir: str) -> str | None:
        embedded = row.get("audio")
        if isinstance(embedded, dict) and embedded.get("bytes"):
            data = embedded["bytes"]
            ext = os.path.splitext(embedded.get("path") or "")[1] or ".mp3"
            uri = storage.join(audio_dir, hashlib.sha256(data).hexdigest()[:24] + ext)
            if not storage.exists(uri):  # content-addressed: written once, shared by questions on one track
                storage.write_bytes(uri, data)
            return uri
        jamendo = text(row.get("jamendo_id"))
        if self.audio_root and jamendo:
            name = self.audio_pattern.format(jamendo_id=jamendo)
            if outside_root(self.audio_root, name):
                return f"outside: audio path {name[:120]!r} leaves audio_root (never opened)"
            return storage.join(self.audio_root, name)
        return None
