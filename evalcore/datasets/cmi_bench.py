"""CMI-Bench (Ma et al., ISMIR 2025, arXiv 2506.12285): 14 MIR tasks over 20 datasets as instruction-following
items, in one released JSON Lines format, scored by the released ``evaluate.py`` (github.com/nicolaus625/CMI-bench,
commit 4c15f410).

Reads the released files unrenamed: ``data/<folder>/CMI_<task>.jsonl`` under the benchmark's root (:data:`TASKS`),
one record a line with ``instruction`` (the prompt), ``input`` (the audio placeholder ``<|SOA|><AUDIO><|EOA|>``),
``output`` (the answer: text, or a number for NSynth pitch), ``uuid`` (empty), ``split`` (a list; its first value
is the split), ``task_type`` (``major`` / ``minor`` lists), ``domain``, ``audio_path`` (a list of paths relative to
the root), ``audio_start`` and ``audio_end`` (seconds; ``audio_end`` −1 = to the end of the file), ``source`` and
``other``. DSing's audio is ``.m4a`` (AAC), decoded by PyAV (:mod:`evalcore.core.audio`).

Item rows: ``item_id`` = ``<task>-<line number>``; ``protocol`` = ``mir`` (``freeform`` for the captioning tasks,
scored by the free-form metrics); ``task`` = the released task name (the file's ``<task>``); ``category`` = the
task's family (:class:`Family`: the rule scoring it is registered under it, :mod:`evalcore.mir_rules.rules`);
``question`` = ``instruction``; ``reference`` = ``output`` (a number as text, a list's first value); the excerpt =
``audio_start`` … ``audio_end``;
``metadata``: ``source``, ``split``, ``task_type``, ``audio_path`` and, for the multi-class tasks, ``label_set``:
the task's distinct answers among the records kept — the label set the released rule compares against (it takes
the answers of the file it scores, which the released inference writes for the test split).

Only records of the chosen ``split`` are kept (the released inference keeps ``split[0] == "test"``). A record that
cannot be an item is an error row with its reason, never dropped: not JSON, not an object, no instruction, no
answer, a ``split`` that is not a list of text, no audio path, or **several audio paths** (evalcore plays one clip
per question; no released task has more than one).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Iterator, Literal, Sequence

from pydantic import Field

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext
from evalcore.datasets.records import FileUnreadable
from evalcore.datasets.released_mcq import AudioOutside, audio_uri, check_records, read_records, record_problem
from evalcore.core.params import PathStr

__all__ = ["Family", "TASKS", "Task", "task_of_file", "label_set_of", "CmiBench"]


class Family:
    """The released scorer's task families: the tasks of one family are scored by one rule, registered under the
    family's name (``@RULES.register(Family.KEY)`` in :mod:`evalcore.mir_rules`), and an item carries its task's
    family as its ``category``, by which the ``mir`` scorer finds that rule. Each name is written here only."""

    MULTICLASS = "cmi_multiclass"  #: one label of the task's closed set (the items' ``label_set``): accuracy
    KEY = "cmi_key"  #: a musical key: mir_eval's weighted score
    BEAT = "cmi_beat"  #: beat or downbeat times: mir_eval's beat measures
    LYRICS = "cmi_lyrics"  #: a transcription: WER and CER
    MELODY = "cmi_melody"  #: (time, MIDI note) pairs: mir_eval's melody accuracy
    TECHNIQUE = "cmi_technique"  #: playing-technique events: frame F1
    REGRESSION = "cmi_regression"  #: a rating: R²
    TAGGING = "cmi_tagging"  #: tags of a vocabulary: ROC-AUC and PR-AUC


#: task → (its released file under the root, its :class:`Family`, the protocol asking it); family None = free-form
#: (captioning: the free-form metrics)
TASKS: dict[str, tuple[str, str | None, str]] = {
    "GTZAN": ("data/GTZAN/CMI_GTZAN.jsonl", Family.MULTICLASS, "mir"),
    "VocalSet_tech": ("data/VocalSet/CMI_VocalSet_tech.jsonl", Family.MULTICLASS, "mir"),
    "Nsynth_instrument": ("data/NSynth/CMI_Nsynth_instrument.jsonl", Family.MULTICLASS, "mir"),
    "Nsynth_pitch": ("data/NSynth/CMI_Nsynth_pitch.jsonl", Family.MULTICLASS, "mir"),
    "GS_key": ("data/GS-key/CMI_GS_key.jsonl", Family.KEY, "mir"),
    "gtzan_beat": ("data/Beat-Transformer/CMI_gtzan_beat.jsonl", Family.BEAT, "mir"),
    "gtzan_downbeat": ("data/Beat-Transformer/CMI_gtzan_downbeat.jsonl", Family.BEAT, "mir"),
    "ballroom_beat": ("data/Beat-Transformer/CMI_ballroom_beat.jsonl", Family.BEAT, "mir"),
    "ballroom_downbeat": ("data/Beat-Transformer/CMI_ballroom_downbeat.jsonl", Family.BEAT, "mir"),
    "DSing": ("data/DSing/CMI_DSing.jsonl", Family.LYRICS, "mir"),
    "MedleyDB": ("data/MedleyDB/CMI_MedleyDB.jsonl", Family.MELODY, "mir"),
    "Guzheng_Tech": ("data/Guzheng/CMI_Guzheng_Tech.jsonl", Family.TECHNIQUE, "mir"),
    "EMO_arousal": ("data/EMO/CMI_EMO_arousal.jsonl", Family.REGRESSION, "mir"),
    "EMO_valence": ("data/EMO/CMI_EMO_valence.jsonl", Family.REGRESSION, "mir"),
    "MTG_genre": ("data/MTG/CMI_MTG_genre.jsonl", Family.TAGGING, "mir"),
    "MTG_instrument": ("data/MTG/CMI_MTG_instrument.jsonl", Family.TAGGING, "mir"),
    "MTG_emotion": ("data/MTG/CMI_MTG_emotion.jsonl", Family.TAGGING, "mir"),
    "MTG_top50tags": ("data/MTG/CMI_MTG_top50tags.jsonl", Family.TAGGING, "mir"),
    "MTT": ("data/MTT/CMI_MTT.jsonl", Family.TAGGING, "mir"),
    "MusicCaps": ("data/MusicCaps/CMI_MusicCaps.jsonl", None, "freeform"),
    "SDD": ("data/SDD/CMI_SDD.jsonl", None, "freeform"),
}
Task = Literal[tuple(TASKS)]  # type: ignore[valid-type]


def task_of_file(name: str) -> str | None:
    """The task of a released file name: ``CMI_<task>.jsonl`` (data) or ``<model>_<task>.jsonl`` (outputs)."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".jsonl").removesuffix(".json")
    return next((t for t in sorted(TASKS, key=len, reverse=True) if stem == f"CMI_{t}" or stem.endswith(f"_{t}")),
                None)


def _answer(v: Any) -> str | None:
    """A released answer as text: text, a number as written, a list's first value; None if none."""
    if isinstance(v, list):
        v = v[0] if v else None
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return str(v)
    return v if isinstance(v, str) and v.strip() else None


def label_set_of(answers: Sequence[Any]) -> list[str]:
    """The distinct answers (as text, in order of first appearance): the released multi-class label set."""
    return list(dict.fromkeys(a for a in (_answer(v) for v in answers) if a is not None))


def _problem(task: str, n: int, rec: dict) -> str | None:
    where = f"CMI-Bench {task} line {n}"
    if not isinstance(rec.get("instruction"), str) or not rec["instruction"].strip():
        return f"{where}: no instruction"
    if _answer(rec.get("output")) is None:
        return f"{where}: no answer (output)"
    paths = rec.get("audio_path")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p.strip() for p in paths):
        return f"{where}: audio_path is not a list of paths"
    if len(paths) > 1:
        return f"{where}: {len(paths)} audio clips (evalcore plays one clip per question)"
    for k in ("audio_start", "audio_end"):
        v = rec.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            return f"{where}: {k} is not a number of seconds"
    return None


@DATASETS.register("cmi_bench")
class CmiBench(Dataset):
    """``root``: the benchmark's folder holding ``data/…/CMI_<task>.jsonl``; ``tasks``: the released task names to
    read; ``split``: the records kept (the first value of their ``split``; default test, as the released
    inference); ``audio_root``: where ``audio_path`` is relative to (default the root)."""

    path_params = {"root": "dir", "audio_root": "dir"}  # must exist (evalcore validate)

    def __init__(self, root: PathStr, tasks: Annotated[Sequence[Task], Field(min_length=1)],
                 split: Literal["test", "train", "dev"] = "test", audio_root: PathStr | None = None) -> None:
        self.root, self.tasks, self.split = root, tuple(dict.fromkeys(tasks)), split
        self.audio_root = audio_root or root

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """Each configured task's released file reads as JSON lines (``evalcore validate``): an empty file, or one
        with no line that reads as JSON, is ``root``'s error naming the file (one bad line is its error row)."""
        for task in dict.fromkeys(params.get("tasks") or ()):
            if task not in TASKS:
                continue  # the params' own check names it
            uri = storage.join(str(params["root"]), TASKS[task][0])
            if not storage.exists(uri):
                raise ValueError(f"root: {TASKS[task][0]} not found under {str(params['root'])[:200]!r} (task {task})")
            try:
                check_records(uri)
            except FileUnreadable as e:
                raise ValueError(f"root: task {task}: {str(e).partition(': ')[2]}") from None

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        for task in self.tasks:
            yield from self._task(task)

    def _task(self, task: str) -> Iterator[dict[str, Any] | BadItem]:
        rel, family, protocol = TASKS[task]
        uri = storage.join(self.root, rel)
        kept: list[tuple[int, dict]] = []
        for n, rec in enumerate(read_records(uri), 1):
            if (problem := record_problem("CMI-Bench", rec)) is not None:
                yield problem
                continue
            split = rec.get("split")
            if not isinstance(split, list) or not split or not all(isinstance(s, str) for s in split):
                yield BadItem(f"CMI-Bench {task} line {n}: split is not a list of text")
                continue
            if split[0] != self.split:
                continue  # the split is chosen by the record's own field
            if (problem := _problem(task, n, rec)) is not None:
                yield BadItem(problem)
                continue
            kept.append((n, rec))
        labels = label_set_of([rec["output"] for _, rec in kept]) if family == Family.MULTICLASS else None
        for n, rec in kept:
            end = rec.get("audio_end")
            meta = {k: rec.get(k) for k in ("source", "split", "task_type", "audio_path")}
            if labels is not None:
                meta["label_set"] = labels
            audio = audio_uri(self.audio_root, rec["audio_path"][0])
            if isinstance(audio, AudioOutside):
                yield BadItem(f"CMI-Bench {task} line {n}: {audio}")
                continue
            yield {"item_id": f"{task}-{n:05d}", "protocol": protocol, "task": task, "category": family,
                   "audio_uri": audio,
                   "excerpt_start": rec.get("audio_start") or None,
                   "excerpt_end": None if end is None or end == -1 else float(end),
                   "question": rec["instruction"], "reference": _answer(rec["output"]),
                   "metadata": json.dumps(meta)}
