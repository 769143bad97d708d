"""MusicNet: factual instrument and composer questions on 330 full-length classical recordings.

``musicnet_metadata.csv`` has ``id, composer, composition, movement, ensemble, source,
transcriber, catalog_name, seconds``; each recording has a label CSV ``{labels_root}/{id}.csv``
(``start_time, end_time, instrument, note, start_beat, end_beat, note_value``; times in samples
at 44.1 kHz) whose ``instrument`` is a General MIDI program (1 piano, 7 harpsichord, 41 violin,
42 viola, 43 cello, 44 contrabass, 61 horn, 69 oboe, 71 bassoon, 72 clarinet, 74 flute) and audio
``{audio_root}/{id}.wav``. The release splits recordings into ``train_*`` and ``test_*`` folders:
``labels_root`` and ``audio_root`` may be lists of paired folders, searched in order.

Tasks: ``instrument`` → labels = the distinct instruments of the label CSV (canonical, in
vocabulary order; a program outside the map stays as its number, so it shows up as an unmatched
label); ``composer`` → labels = [the canonical composer]. A recording whose label CSV
is missing or has no notes (instrument task), or whose composer is empty, gets no labels, so
validation turns it into an error row (``metadata.labels_error`` says why). Recordings are played
whole; models with a shorter window are chunked by the pipeline.

``formats`` adds the derived formats of every item (``binary_choice``, ``true_false``; see
:func:`evalcore.datasets.factual_formats.derive_formats`) over the task's vocabulary (the 11
instruments or the 10 composers), seeded by ``format_seed``.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Literal, Sequence

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext, FactualVocabulary
from evalcore.datasets.factual_formats import BINARY_ORDERS, FORMATS, derive_formats
from evalcore.datasets.records import leaves_root
from evalcore.datasets.tabular import check_table, number, read_rows, read_table, text, undecodable
from evalcore.core.params import Count, PathStr
from evalcore.vocab import MUSICNET_INSTRUMENTS, normalize, vocabulary

TASKS = ("instrument", "composer")
QUESTIONS = {
    "instrument": "Which instruments are used in this piece of music?",
    "composer": "Which classical composer's style does this piece resemble the most?",
}


@DATASETS.register("musicnet")
class MusicNet(Dataset):
    """``binary_order``: ``balanced`` (exactly half of the binary-choice items name the truth first) or ``coin``."""
    path_params = {"metadata": "file", "audio_root": "dir", "labels_root": "dir"}  # must exist (evalcore validate)

    @classmethod
    def factual_vocabulary(cls, params: dict[str, Any]) -> FactualVocabulary:
        """The 11 MusicNet instruments or the 10 composers, by the configured task."""
        task = str(params.get("task", "instrument"))
        return FactualVocabulary(tasks={task: "composer" if task == "composer" else "musicnet_instrument"})

    def __init__(self, metadata: PathStr, audio_root: PathStr | Sequence[PathStr],
                 labels_root: PathStr | Sequence[PathStr] | None = None, task: Literal[TASKS] = "instrument",
                 question: str | None = None, limit: Count | None = None,
                 formats: Sequence[Literal[FORMATS]] = ("standard",), format_seed: int = 0,
                 binary_order: Literal[BINARY_ORDERS] = "balanced") -> None:
        derive_formats([], formats, [], 0, binary_order)  # checks the format names and the order
        if task not in TASKS:
            raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
        audio = [audio_root] if isinstance(audio_root, str) else list(audio_root)
        labels = [labels_root] if isinstance(labels_root, str) else list(labels_root or [])
        if task == "instrument" and not labels:
            raise ValueError("the instrument task needs labels_root (the folder(s) of per-recording label CSVs)")
        if labels and len(labels) != len(audio):
            raise ValueError(f"labels_root and audio_root must pair up: {len(labels)} vs {len(audio)} folders")
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self.metadata, self.audio_roots, self.labels_roots = metadata, audio, labels
        self.task, self.question, self.limit = task, question or QUESTIONS[task], limit
        self.formats, self.format_seed, self.binary_order = list(formats), format_seed, binary_order

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The metadata CSV reads as a table with an ``id`` column (``evalcore validate``)."""
        check_table(str(params["metadata"]), "metadata", ("id",))

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        rows, misfits = read_rows(self.metadata, "metadata", ("id",))
        yield from map(BadItem, misfits)  # lines that do not fit the header: counted, never skipped
        items = []
        for i, row in enumerate(rows[: self.limit] if self.limit is not None else rows):
            rid = text(row.get("id"))
            if (problem := undecodable(row)) is not None:
                yield BadItem(f"MusicNet row {i}: {problem}")
            elif rid is not None and leaves_root(rid):
                yield BadItem(f"MusicNet row {i}: recording id {rid[:80]!r} leaves audio_root (never opened)")
            else:
                items.append(self._item(i, row))
        if self.formats == ["standard"]:
            yield from items
            return
        yield from derive_formats(items, self.formats, vocabulary(self.task), self.format_seed, self.binary_order)

    def _item(self, i: int, row: dict[str, Any]) -> dict[str, Any]:
        rid = text(row.get("id"))
        folder = self._folder(rid) if rid else 0
        meta: dict[str, Any] = {
            "id": rid, "composer": text(row.get("composer")), "composition": text(row.get("composition")),
            "movement": text(row.get("movement")), "ensemble": text(row.get("ensemble")),
            "source": text(row.get("source")), "transcriber": text(row.get("transcriber")),
            "catalog_name": text(row.get("catalog_name")), "seconds": number(row.get("seconds")),
        }
        labels: list[str] | None = None
        if rid is None:
            meta["labels_error"] = "no recording id"
        elif self.task == "composer":
            labels = [normalize(meta["composer"], "composer")] if meta["composer"] else None
            if labels is None:
                meta["labels_error"] = "no composer"
        else:
            labels, programs, error = self._instruments(storage.join(self.labels_roots[folder], f"{rid}.csv"))
            meta["programs"] = programs
            if error:
                meta["labels_error"] = error
        return {
            "item_id": rid or f"row{i:05d}", "protocol": "factual", "task": self.task,
            "audio_uri": storage.join(self.audio_roots[folder], f"{rid}.wav") if rid else None,
            "question": self.question, "labels": labels, "category": meta["ensemble"],
            "metadata": json.dumps(meta),
        }

    def _folder(self, rid: str) -> int:
        """Index of the (labels, audio) folder pair holding recording ``rid`` (the first by default)."""
        if len(self.labels_roots) > 1:
            for k, root in enumerate(self.labels_roots):
                if storage.exists(storage.join(root, f"{rid}.csv")):
                    return k
        return 0

    @staticmethod
    def _instruments(uri: str) -> tuple[list[str] | None, list[int], str | None]:
        """(canonical instruments, distinct GM programs, error) of one label CSV."""
        if not storage.exists(uri):
            return None, [], f"label file not found: {uri}"
        try:
            df = read_table(uri)
        except (ValueError, OSError) as e:  # a label file that is not a CSV: this recording's error, not the run's
            return None, [], f"label file is not a readable CSV ({type(e).__name__}): {uri}"
        if "instrument" not in df.columns:
            return None, [], f"label file has no 'instrument' column: {uri}"
        programs: list[int] = []
        for v in df["instrument"]:
            t = text(v)
            if t is None:
                continue
            try:
                p = int(float(t))
            except (ValueError, OverflowError):
                return None, [], f"instrument {t!r} is not a General MIDI program number: {uri}"
            if p not in programs:
                programs.append(p)
        if not programs:
            return None, [], f"label file has no notes: {uri}"
        found = list(dict.fromkeys(normalize(str(p), "instrument") for p in programs))
        order = {lab: k for k, lab in enumerate(MUSICNET_INSTRUMENTS)}
        return sorted(found, key=lambda lab: (order.get(lab, len(order)), lab)), sorted(programs), None
