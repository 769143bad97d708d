"""MMAU-Pro (Kumar et al., 2025, arXiv 2508.13992): 5,305 questions over speech, sound, music, their mixes,
long, spatial and multi-clip audio; evalcore keeps the multiple-choice questions of the chosen ``category``
values (default ``music``).

Reads the released ``test.parquet`` unrenamed (Hugging Face ``gamma-lab-umd/MMAU-Pro``; the fields the released
evaluator, github.com/sonalkum/MMAUPro ``evaluate_mmau_pro_comprehensive.py``, reads): ``id``, ``audio_path``
(a **list** of paths ``data/<name>.wav``, relative to the folder the released ``data.zip`` is extracted in),
``question``, ``answer`` (a choice text), ``choices`` (a list; empty for open questions), ``category`` (the
domain; ``open`` and ``instruction following`` are the evaluator's non-multiple-choice groups),
``perceptual_skills`` and ``reasoning_skills`` (lists), ``length_type``, ``sub-cat``, ``transcription``,
``task_classification``, ``task_identifier`` and ``kwargs`` (instruction following).

As the released evaluator does, the multiple-choice questions are the rows whose category is neither ``open``
nor ``instruction following`` and that have at least two choices; of those, ``categories`` picks the kept
ones. A kept row without two choices, or playing several clips (evalcore plays one clip per question), is an
error row saying so, never dropped. Item rows: ``item_id`` = ``id``; ``task`` = ``mmau-pro``; ``category`` =
the category; ``metadata.secondary_categories`` = the perceptual and reasoning skills (the report's per-skill
breakdown); ``metadata.length_type`` and ``sub-cat`` kept.
"""

from __future__ import annotations

from typing import Annotated, Any, Iterator, Sequence

from pydantic import AfterValidator, Field

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.records import FileUnreadable
from evalcore.datasets.released_mcq import audio_uri, mcq_item, subset_problem, text_list
from evalcore.core.params import PathStr

#: the released evaluator's categories that are not multiple choice
NOT_MCQ = ("open", "instruction following")
#: the columns the loader reads (the released test.parquet has them all)
COLUMNS = ("id", "audio_path", "question", "answer", "choices", "category")


def read_rows(path: str) -> list[dict[str, Any]]:
    """The rows of the released Parquet; :class:`FileUnreadable` naming ``path`` when it is not a Parquet file (empty,
    cut short, another format) or lacks a column the loader reads."""
    try:
        table = storage.read_parquet(path)
        missing = [c for c in COLUMNS if c not in table.column_names]
        rows = [] if missing else table.to_pylist()
    except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError, so is a string that is not UTF-8
        raise FileUnreadable(f"path: {path!r} is not a readable Parquet file ({str(e).splitlines()[0][:160]})") from None
    if missing:
        raise FileUnreadable(f"path: {path!r} lacks column(s) {missing} of MMAU-Pro's test.parquet")
    return rows


def mcq_categories(categories: Sequence[str]) -> Sequence[str]:
    """``categories`` if none is one of the evaluator's non-multiple-choice groups; ValueError otherwise."""
    bad = [c for c in categories if c in NOT_MCQ]
    if bad:
        raise ValueError(f"{bad} are not multiple-choice categories of MMAU-Pro")
    return categories


@DATASETS.register("mmau_pro")
class MMAUPro(Dataset):
    """``path``: the released ``test.parquet``; ``audio_root``: the folder holding ``data/``, by default the
    Parquet's folder; ``categories``: the ``category`` values kept (default music)."""

    path_params = {"path": "file", "audio_root": "dir"}  # must exist (evalcore validate)

    def __init__(self, path: PathStr, audio_root: PathStr | None = None,
                 categories: Annotated[Sequence[str], Field(min_length=1), AfterValidator(mcq_categories)] = ("music",),
                 ) -> None:
        mcq_categories(categories)
        self.path, self.audio_root, self.categories = path, audio_root, tuple(categories)

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The released Parquet reads and has the columns the loader reads (``evalcore validate``)."""
        read_rows(str(params["path"]))

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        root = self.audio_root or storage.parent(self.path)
        for rec in read_rows(self.path):
            if (problem := subset_problem("MMAU-Pro", rec, "category")) is not None:
                yield problem  # a row that cannot be placed in or out of the subset: counted, never dropped
                continue
            if rec.get("category") not in self.categories:
                continue  # the subset is chosen by the file's own category field
            yield self._item(rec, root)

    @staticmethod
    def _item(rec: dict[str, Any], root: str) -> dict[str, Any] | BadItem:
        rid = rec.get("id")
        choices = text_list(rec.get("choices"))
        if choices is None or len(choices) < 2:
            return BadItem(f"MMAU-Pro item {rid!r}: fewer than two choices (the released evaluator leaves such "
                           "rows out of its multiple-choice accuracy)")
        paths = text_list(rec.get("audio_path"))
        if paths is None:
            paths = [rec["audio_path"]] if isinstance(rec.get("audio_path"), str) else []
        if len(paths) != 1:
            return BadItem(f"MMAU-Pro item {rid!r}: {len(paths)} audio clips (evalcore plays one clip per question)")
        skills = [*(text_list(rec.get("perceptual_skills")) or []), *(text_list(rec.get("reasoning_skills")) or [])]
        return mcq_item("MMAU-Pro", rid, rec.get("question"), choices, rec.get("answer"),
                        audio_uri(root, paths[0]), task="mmau-pro", category=rec.get("category"),
                        metadata={"audio_path": paths[0], "length_type": rec.get("length_type"),
                                  "sub-cat": rec.get("sub-cat"), "secondary_categories": skills})
