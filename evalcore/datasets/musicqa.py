"""MusicQA free-form QA from its released JSON (``EvalMusicQA.json`` and the MagnaTagATune split).

Row form: ``{"audio_name": "012542.wav", "conversation": [{"from": "human", "value": Q},
{"from": "gpt", "value": A}]}``. Each row becomes a ``protocol="freeform"`` item with
``item_id = "<audio stem>-<k>"``, k the row's position among its clip's rows in file
order (so repeated question/answer pairs of a clip get distinct, stable ids).
``task`` is ``"captioning"`` for the four generic questions asked of every clip
(paper App. C.1; the released text says "audio" where the paper says "music"), else ``"qa"``.
"""

from __future__ import annotations

import itertools
import json
import posixpath
from collections import Counter
from typing import Any, Iterator, Literal

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.records import Unreadable, check_json, json_records, leaves_root
from evalcore.core.params import Count, PathStr

# The questions asked of all 560 clips of EvalMusicQA.json (560 rows each; no other question exceeds 79).
CAPTIONING_QUESTIONS = (
    "Describe the audio",
    "Describe the audio in detail",
    "What do you hear in the audio?",
    "What can be inferred from the audio?",
)


def _turns(row: Any) -> tuple[str, str] | str:
    """(question, answer) of a row, or the reason it is malformed."""
    if not isinstance(row, dict):
        return f"not a JSON object ({type(row).__name__})"
    name, conv = row.get("audio_name"), row.get("conversation")
    if not isinstance(name, str) or not name.strip():
        return "missing audio_name"
    if not isinstance(conv, list) or len(conv) != 2 or not all(isinstance(t, dict) for t in conv):
        return "conversation must be a list of 2 turns (human, gpt)"
    if [t.get("from") for t in conv] != ["human", "gpt"]:
        return f"conversation roles must be ['human', 'gpt'], got {[t.get('from') for t in conv]}"
    q, a = conv[0].get("value"), conv[1].get("value")
    if not isinstance(q, str) or not q.strip() or not isinstance(a, str) or not a.strip():
        return "question and answer must be non-empty strings"
    return q, a


@DATASETS.register("musicqa")
class MusicQA(Dataset):
    """``path``: local path or s3:// URI of the JSON file; ``audio_root``: prefix for ``audio_name``;
    ``limit``: only the first rows; ``subset``: ``captioning`` (the four generic questions, paper App. C.1)
    or ``qa`` (the others) keeps only those rows, with the item ids of the whole file."""
    path_params = {"path": "file", "audio_root": "dir"}  # must exist (evalcore validate)

    def __init__(self, path: PathStr, audio_root: PathStr | None = None, limit: Count | None = None,
                 subset: Literal["all", "captioning", "qa"] = "all") -> None:
        if subset not in ("all", "captioning", "qa"):
            raise ValueError(f"subset must be all, captioning or qa, got {subset!r}")
        self.path = path
        self.audio_root = audio_root
        self.limit = limit
        self.subset = subset

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """The released JSON reads as a list of rows (``evalcore validate``): empty, not JSON, another shape or cut
        short is ``path``'s error (one unreadable row is that row's error row)."""
        check_json(str(params["path"]), "path", "list")

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        rows = (row for _, row in json_records(storage.read_bytes(self.path), "path", self.path, "list"))
        if self.limit is not None:
            rows = itertools.islice(rows, self.limit)
        per_clip: Counter[str] = Counter()
        for i, row in enumerate(rows):
            if isinstance(row, Unreadable):
                yield BadItem(f"MusicQA row {i}: {row.reason}")
                continue
            name = row.get("audio_name") if isinstance(row, dict) else None
            k = per_clip[name] if isinstance(name, str) else 0
            if isinstance(name, str):
                per_clip[name] += 1
            got = _turns(row)
            if isinstance(got, str):
                yield BadItem(f"MusicQA row {i} ({name!r}): {got}")
                continue
            question, answer = got
            task = "captioning" if question.strip() in CAPTIONING_QUESTIONS else "qa"
            if self.subset not in ("all", task):
                continue
            if self.audio_root and leaves_root(name):
                yield BadItem(f"MusicQA row {i} ({name[:80]!r}): audio path leaves audio_root (never opened)")
                continue
            stem = posixpath.splitext(posixpath.basename(name))[0]
            audio = storage.join(self.audio_root, name) if self.audio_root else name
            yield {
                "item_id": f"{stem}-{k}",
                "protocol": "freeform",
                "task": task,
                "audio_uri": audio,
                "question": question,
                "reference": answer,
                "metadata": json.dumps({"row": i, "audio_name": name}),
            }
