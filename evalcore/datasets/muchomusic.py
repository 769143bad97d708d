"""MuChoMusic: multiple-choice questions over MusicCaps and Song Describer clips (released CSV).

Columns: ``question, correct_answer, distractor_1_answer`` (incorrect but related, IR),
``distractor_2_answer`` (correct but unrelated, CU), ``distractor_3_answer`` (incorrect and
unrelated, IU), ``dataset`` (sdd | musiccaps), ``dataset_identifier``, ``genre``,
``music_knowledge``, ``music_reasoning`` (lists stored as strings). Options are kept in the
canonical order correct, IR, CU, IU (the pipeline shuffles them per option order), and
``metadata.option_types`` names each option's type and ``metadata.options_by_type`` maps each type
to its text (which type a response chose, in the report's distractor table). ``genre`` is one
string kept whole, as the released scorer groups by it ("Folk, World, & Country" is one genre).

Audio, as released (``muchomusic_eval/utils.py``), without renaming any file; ``audio_root`` is the
released ``data`` folder:

* identifiers end in ``.json``; a Song Describer one is the track id (``"415600.json"``), a MusicCaps
  one the YouTube id plus a ``_k`` suffix (``"-0Gj8-vB1q4_1.json"`` → ``-0Gj8-vB1q4``);
* Song Describer: ``{audio_root}/sdd/audio/<path>`` with ``path`` from ``sdd/song_describer.csv`` (its
  ``.mp3`` read as ``.2min.mp3``); without that file, the dataset's own folder rule
  ``<track id mod 100, two digits>/<track id>.2min.mp3``;
* MusicCaps: the file of that YouTube id in ``{audio_root}/musiccaps/audio/``, named
  ``[<ytid>]-[<start>-<end>].wav`` (the released evaluation layout), ``<ytid>-[<start>-<end>].wav`` or
  ``<ytid>_<start>.wav`` (the released download script); else the released name built from
  ``musiccaps/musiccaps-public.csv`` (``start_s``, ``end_s``). A clip found by neither has no audio, so
  validation makes it an error row, and ``metadata.audio_error`` says why.

``audio_pattern`` replaces the released layout by a pattern under ``audio_root`` (placeholders
``{dataset}``, ``{dataset_identifier}`` as written in the CSV and ``{audio_id}``, the released id).
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Annotated, Any, Iterator, Literal, Sequence

from pydantic import Field

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.records import outside_root
from evalcore.datasets.tabular import check_table, read_rows, read_table, string_list, text, undecodable
from evalcore.core.params import PathStr

DISTRACTORS = {"IR": "distractor_1_answer", "CU": "distractor_2_answer", "IU": "distractor_3_answer"}
#: the CSV columns the loader reads (the released CSV has them all)
COLUMNS = ("question", "correct_answer", *DISTRACTORS.values(), "dataset", "dataset_identifier")
#: MusicCaps file names of the released layouts → the YouTube id (11 characters of [A-Za-z0-9_-])
_MUSICCAPS_FILE = re.compile(r"^\[?(?P<ytid>[A-Za-z0-9_-]{11})\]?(?:-\[\d+(?:\.\d+)?-\d+(?:\.\d+)?\]|_\d+)\.wav$")


def audio_id(dataset: str | None, identifier: str | None) -> str | None:
    """The released id of a row: the track id (SDD) or the YouTube id (MusicCaps), by the released rule."""
    if not identifier:
        return None
    if not identifier.endswith(".json"):
        return identifier  # not the released form: taken as the id itself
    ident = identifier[: -len(".json")]
    if dataset == "musiccaps" and "_" in ident:
        return ident.rsplit("_", 1)[0]
    return ident


def genre_values(v: Any) -> list[str]:
    """The genre cell: a list literal as its list, any other text as one genre (commas included)."""
    t = text(v)
    if t is None:
        return []
    return string_list(t) if t.startswith("[") else [t]


class _ReleasedAudio:
    """Where the released layout puts each clip (metadata files and the MusicCaps folder read once)."""

    def __init__(self, audio_root: str, sdd_metadata: str | None, musiccaps_metadata: str | None) -> None:
        self.root = audio_root
        self.musiccaps_dir = storage.join(audio_root, "musiccaps", "audio")
        self.musiccaps_files: dict[str, str] = {}
        for uri in storage.list_files(self.musiccaps_dir, ".wav"):
            m = _MUSICCAPS_FILE.match(uri.rsplit("/", 1)[-1])
            if m:
                self.musiccaps_files.setdefault(m.group("ytid"), uri)
        sdd = self._rows(sdd_metadata or storage.join(audio_root, "sdd", "song_describer.csv"))
        self.sdd_paths = {str(text(r.get("track_id"))): str(text(r.get("path"))) for r in sdd
                          if text(r.get("track_id")) and text(r.get("path"))}
        caps = self._rows(musiccaps_metadata or storage.join(audio_root, "musiccaps", "musiccaps-public.csv"))
        self.musiccaps_spans = self._spans(caps)
        #: each clip's caption as its metadata file has it (MusicCaps' expert caption; a Song Describer track's first)
        self.captions = {("musiccaps", str(text(r.get("ytid")))): text(r.get("caption")) for r in caps
                         if text(r.get("caption"))}
        for r in sdd:
            if text(r.get("track_id")) and text(r.get("caption")):
                self.captions.setdefault(("sdd", str(text(r.get("track_id")))), text(r.get("caption")))

    @staticmethod
    def _rows(uri: str) -> list[dict[str, Any]]:
        return read_table(uri).to_dict("records") if storage.exists(uri) else []

    @staticmethod
    def _spans(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
        out = {}
        for r in rows:
            try:
                out.setdefault(str(text(r.get("ytid"))), (int(float(r["start_s"])), int(float(r["end_s"]))))
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def caption(self, dataset: str | None, ident: str | None) -> str | None:
        """The clip's caption in its metadata file (None: none there)."""
        if dataset == "sdd" and ident is not None:
            try:
                ident = str(int(ident))
            except ValueError:
                return None
        return self.captions.get((dataset or "", ident or ""))

    def locate(self, dataset: str, ident: str) -> tuple[str | None, str | None]:
        """(audio URI, or None and why) of a clip."""
        if dataset == "sdd":
            try:
                tid = int(ident)
            except ValueError:
                return None, f"Song Describer id {ident!r} is not a track id"
            path = (self.sdd_paths.get(str(tid)) or f"{tid % 100:02d}/{tid}.mp3").replace(".mp3", ".2min.mp3")
            folder = storage.join(self.root, "sdd", "audio")
            if outside_root(folder, path):
                return None, f"audio path {path[:120]!r} leaves audio_root (never opened)"
            return storage.join(folder, path), None
        if dataset == "musiccaps":
            if ident in self.musiccaps_files:
                return self.musiccaps_files[ident], None
            if ident in self.musiccaps_spans:
                start, end = self.musiccaps_spans[ident]
                return storage.join(self.musiccaps_dir, f"[{ident}]-[{start}-{end}].wav"), None
            return None, (f"no MusicCaps file for {ident!r} in {self.musiccaps_dir} and no start/end for it in "
                          "musiccaps-public.csv")
        return None, f"unknown source dataset {dataset!r} (sdd or musiccaps)"


@DATASETS.register("muchomusic")
class MuChoMusic(Dataset):
    """``path``: the CSV; ``audio_root``: the released ``data`` folder (or ``audio_pattern`` under it);
    ``sdd_metadata`` / ``musiccaps_metadata``: the metadata CSVs if not at their released place;
    ``distractors`` keeps a subset of the distractor types (the paper's distractor ablation)."""
    path_params = {"path": "file", "audio_root": "dir", "sdd_metadata": "file",
                   "musiccaps_metadata": "file"}  # must exist (evalcore validate)

    def __init__(self, path: PathStr, audio_root: PathStr, audio_pattern: PathStr | None = None,
                 distractors: Annotated[Sequence[Literal["IR", "CU", "IU"]], Field(min_length=1)] = ("IR", "CU", "IU"),
                 sdd_metadata: PathStr | None = None, musiccaps_metadata: PathStr | None = None) -> None:
        unknown = set(distractors) - set(DISTRACTORS)
        if unknown or not distractors:
            raise ValueError(f"distractors must be a non-empty subset of {sorted(DISTRACTORS)}, got {distractors}")
        self.path, self.audio_root, self.audio_pattern = path, audio_root, audio_pattern
        self.sdd_metadata, self.musiccaps_metadata = sdd_metadata, musiccaps_metadata
        self.distractors = [d for d in DISTRACTORS if d in distractors]

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The released CSV reads as a table with the columns the loader reads (``evalcore validate``)."""
        check_table(str(params["path"]), "path", COLUMNS)

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        released = (None if self.audio_pattern is not None
                    else _ReleasedAudio(self.audio_root, self.sdd_metadata, self.musiccaps_metadata))
        rows, misfits = read_rows(self.path, "path", COLUMNS)
        yield from map(BadItem, misfits)  # lines that do not fit the header: counted, never skipped
        for i, row in enumerate(rows):
            if (problem := undecodable(row)) is not None:
                yield BadItem(f"MuChoMusic row {i}: {problem}")
                continue
            yield self._item(i, row, released)

    def write_subset(self, item_ids: set[str], out: str) -> int | None:
        """The released CSV's rows of ``item_ids`` (``q<row>``), with its header, in its order; the subset reads
        back with the same ``audio_root`` (its items are numbered anew, by their row in the subset)."""
        rows, _ = read_rows(self.path, "path", COLUMNS)
        kept = [row for i, row in enumerate(rows) if f"q{i:05d}" in item_ids]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(kept)
        storage.write_text(out, buf.getvalue())
        return len(kept)

    def _audio(self, source: str | None, ident: str | None, released: _ReleasedAudio | None) -> tuple[str | None,
                                                                                                    str | None]:
        aid = audio_id(source, ident)
        if not source or not ident or aid is None:
            return None, "no dataset or dataset_identifier"
        if released is None:
            name = str(self.audio_pattern).format(dataset=source, dataset_identifier=ident, audio_id=aid)
            if outside_root(self.audio_root, name):
                return None, f"audio path {name[:120]!r} leaves audio_root (never opened)"
            return storage.join(self.audio_root, name), None
        return released.locate(source, aid)

    def _item(self, i: int, row: dict[str, Any], released: _ReleasedAudio | None) -> dict[str, Any] | BadItem:
        kinds = ["correct", *self.distractors]
        options = [text(row.get("correct_answer")), *(text(row.get(DISTRACTORS[d])) for d in self.distractors)]
        source, ident = text(row.get("dataset")), text(row.get("dataset_identifier"))
        audio, audio_error = self._audio(source, ident, released)
        if audio_error and "leaves audio_root" in audio_error:
            return BadItem(f"MuChoMusic row {i}: {audio_error}")
        meta = {
            "dataset_identifier": ident, "audio_id": audio_id(source, ident), "option_types": kinds,
            "options_by_type": dict(zip(kinds, options)),
            "genre": genre_values(row.get("genre")),
            "music_knowledge": string_list(row.get("music_knowledge")),
            "music_reasoning": string_list(row.get("music_reasoning")),
        }
        if audio_error:
            meta["audio_error"] = audio_error
        item = {
            "item_id": f"q{i:05d}", "protocol": "mcq", "task": "muchomusic", "audio_uri": audio,
            "question": text(row.get("question")), "options": options, "correct_option": 0,
            "category": source, "metadata": json.dumps(meta),
        }
        caption = released.caption(source, audio_id(source, ident)) if released is not None else None
        return {**item, "caption": caption} if caption else item
