"""RUL-MuchoMusic (RUListening, "Are you really listening?"): MuChoMusic's questions with new distractors.

Reads the released ``RUL-MuchoMusic.json`` (github.com/yongyizang/AreYouReallyListening, d3971de) as it is:
one JSON object keyed by question id (``"1740"``; MuChoMusic's ``question_id``, 1,187 of them), each value
with ``question``, ``caption`` (the source dataset's caption, never shown to the model), ``correct_answer``,
``distractors`` (four texts) and ``PI`` (the question's Perceptual Index, :mod:`evalcore.scorers.perceptual_index`).

**Folds**, as the released scripts build them (the leave-one-out protocol the dataset card asks results to be
reported with): one item per question and left-out distractor, ``<id>-f<k>`` leaving out distractor ``k`` — the
correct answer and the other distractors, in the released order (correct first, then the distractors in file
order); the pipeline shows them in a seeded random order per item, as the released scripts shuffle every fold.
The scripts' one-shot mode (all five options) is not offered: the card reports leave-one-out.

``metadata`` holds ``rul_id`` (the question id), ``fold`` (the left-out distractor's index),
``excluded_distractor``, ``released_pi`` and, when located through MuChoMusic, ``audio_id`` (the clip; several
questions share one).

**Audio.** The released JSON names no file. Two layouts, nothing renamed:

* ``audio_dir``: the layout the released evaluation scripts read, one file per question,
  ``<audio_dir>/<question id>.mp3`` (``audio_pattern`` changes the name, placeholder ``{question_id}``);
* ``muchomusic_csv`` + ``audio_root``: MuChoMusic's released CSV and ``data`` folder, each question's clip found
  as :mod:`evalcore.datasets.muchomusic` finds it. A question is matched to its CSV row by the CSV's
  ``question_id`` column when it has one, else by the same ``question`` and ``correct_answer`` text; a question
  matched by no row, or by rows of different clips, has no audio (``metadata.audio_error`` says why) and becomes an
  error row.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterator

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.muchomusic import _ReleasedAudio, audio_id
from evalcore.datasets.records import Unreadable, check_json, json_records, leaves_root
from evalcore.datasets.tabular import read_table, text
from evalcore.core.params import PathStr

__all__ = ["RulMuchoMusic", "TASK", "read_released"]

TASK = "rul_muchomusic"


def read_released(path: str) -> Iterator[tuple[str, Any]]:
    """(question id, entry or :class:`~evalcore.datasets.records.Unreadable`) of the released JSON, an object keyed
    by question id, in file order with a repeated id kept at each place (validation makes the later ones error
    rows); :class:`~evalcore.datasets.records.FileUnreadable` naming ``path`` when it cannot be read at all."""
    for qid, entry in json_records(storage.read_bytes(path), "path", path, "object"):
        yield str(qid), entry


def _pi(v: Any) -> float | None | str:
    """The released Perceptual Index as a float, None when absent, or why it is not a usable number."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"PI is not a number ({str(v)[:40]!r})"
    try:
        pi = float(v)
    except OverflowError:
        return f"PI is not a number in range (an integer of {len(str(abs(int(v))))} digits)"
    return pi if math.isfinite(pi) else f"PI is not finite ({pi!r})"


class _MuchoMusicClips:
    """Question → (dataset, released clip id) from MuChoMusic's CSV, by ``question_id`` or by question text."""

    def __init__(self, csv: str) -> None:
        rows = read_table(csv).to_dict("records")
        self.by_id = {str(text(r.get("question_id"))): r for r in rows if text(r.get("question_id")) is not None}
        self.by_text: dict[tuple[str | None, str | None], list[dict]] = {}
        for r in rows:
            self.by_text.setdefault((text(r.get("question")), text(r.get("correct_answer"))), []).append(r)

    def row(self, qid: str, entry: dict[str, Any]) -> tuple[dict | None, str | None]:
        """MuChoMusic's row of a question, or None and why."""
        if self.by_id:
            r = self.by_id.get(qid)
            return (r, None) if r is not None else (None, f"question_id {qid!r} is not in the MuChoMusic CSV")
        found = self.by_text.get((text(entry.get("question")), text(entry.get("correct_answer"))), [])
        clips = {(text(r.get("dataset")), text(r.get("dataset_identifier"))) for r in found}
        if not found:
            return None, "no MuChoMusic CSV row has this question and correct answer"
        if len(clips) > 1:
            return None, f"{len(found)} MuChoMusic CSV rows of different clips have this question and answer"
        return found[0], None


@DATASETS.register("rul_muchomusic")
class RulMuchoMusic(Dataset):
    """``path``: the released ``RUL-MuchoMusic.json``; audio by ``audio_dir`` (one file per question) or by
    ``muchomusic_csv`` + ``audio_root`` (MuChoMusic's released layout)."""

    path_params = {"path": "file", "audio_dir": "dir", "muchomusic_csv": "file", "audio_root": "dir",
                   "sdd_metadata": "file", "musiccaps_metadata": "file"}  # must exist (evalcore validate)

    def __init__(self, path: PathStr, audio_dir: PathStr | None = None, audio_pattern: str = "{question_id}.mp3",
                 muchomusic_csv: PathStr | None = None, audio_root: PathStr | None = None,
                 sdd_metadata: PathStr | None = None, musiccaps_metadata: PathStr | None = None) -> None:
        if (audio_dir is None) == (muchomusic_csv is None):
            raise ValueError("audio_dir: give exactly one of audio_dir (one file per question) or muchomusic_csv with "
                             "audio_root (MuChoMusic's released layout)")
        if muchomusic_csv is not None and audio_root is None:
            raise ValueError("audio_root: muchomusic_csv needs audio_root, MuChoMusic's released data folder")
        if "{question_id}" not in audio_pattern:
            raise ValueError(f"audio_pattern: must hold {{question_id}}, got {audio_pattern!r}")
        self.path, self.audio_dir, self.audio_pattern = path, audio_dir, audio_pattern
        self.muchomusic_csv, self.audio_root = muchomusic_csv, audio_root
        self.sdd_metadata, self.musiccaps_metadata = sdd_metadata, musiccaps_metadata

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        clips = released = None
        if self.muchomusic_csv is not None:
            clips = _MuchoMusicClips(self.muchomusic_csv)
            released = _ReleasedAudio(str(self.audio_root), self.sdd_metadata, self.musiccaps_metadata)
        for qid, entry in read_released(self.path):
            if isinstance(entry, Unreadable):
                yield entry
            elif isinstance(entry, dict) and isinstance(pi := _pi(entry.get("PI")), str):
                yield BadItem(f"RUL-MuchoMusic question {qid[:80]!r}: {pi}")
            else:  # an entry that is not an object: an item without fields, so error rows under its own id
                yield from self._items(qid, entry if isinstance(entry, dict) else {}, clips, released)

    def _audio(self, qid: str, entry: dict[str, Any], clips: _MuchoMusicClips | None,
               released: _ReleasedAudio | None) -> tuple[str | None, dict[str, Any]]:
        """(audio URI or None, metadata about the clip: ``audio_id``/``category`` or ``audio_error``)."""
        if clips is None or released is None:
            name = self.audio_pattern.format(question_id=qid)
            if leaves_root(name):
                return None, {"audio_error": f"audio path {name[:120]!r} leaves audio_dir (never opened)"}
            return storage.join(str(self.audio_dir), name), {}
        row, why = clips.row(qid, entry)
        if row is None:
            return None, {"audio_error": why}
        source, ident = text(row.get("dataset")), text(row.get("dataset_identifier"))
        aid = audio_id(source, ident)
        if not source or aid is None:
            return None, {"audio_error": "the MuChoMusic row has no dataset or dataset_identifier"}
        uri, why = released.locate(source, aid)
        return uri, ({"audio_id": aid, "source_dataset": source} if uri else {"audio_error": why})

    def _items(self, qid: str, entry: dict[str, Any], clips: _MuchoMusicClips | None,
               released: _ReleasedAudio | None) -> Iterator[dict[str, Any]]:
        distractors = entry.get("distractors")
        distractors = [text(d) for d in distractors] if isinstance(distractors, list) else []
        correct = text(entry.get("correct_answer"))
        uri, clip = self._audio(qid, entry, clips, released)
        if uri is None and "leaves audio_dir" in clip.get("audio_error", ""):
            yield BadItem(f"RUL-MuchoMusic question {qid[:80]!r}: {clip['audio_error']}")
            return
        base = {"rul_id": qid, "released_pi": _pi(entry.get("PI")), **clip}
        # one item per left-out distractor; with fewer than two distractors no fold has two options: one item with
        # the correct answer alone, an error row
        folds: list[int | None] = list(range(len(distractors))) if len(distractors) >= 2 else [None]
        caption = released.caption(clip.get("source_dataset"), clip.get("audio_id")) if released is not None else None
        for k in folds:
            kept = [d for j, d in enumerate(distractors) if k is not None and j != k]
            yield ({"caption": caption} if caption else {}) | {
                "item_id": qid if k is None else f"{qid}-f{k}",
                "protocol": "mcq", "task": TASK, "audio_uri": uri, "question": text(entry.get("question")),
                "options": [correct, *kept], "correct_option": 0, "category": clip.get("source_dataset"),
                "metadata": json.dumps({**base, "fold": k, "excluded_distractor": None if k is None else distractors[k]}),
            }

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The parameter rules (exactly one audio layout, ``audio_pattern``) and that the released file reads as an
        object keyed by question id, checked by ``evalcore validate``."""
        cls(**params)
        check_json(str(params["path"]), "path", "object")
