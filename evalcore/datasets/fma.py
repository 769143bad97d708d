"""FMA (Free Music Archive): factual genre questions from the official ``fma_metadata`` files.

``tracks.csv`` has two header rows (then the ``track_id,,,…`` index-name row) and is read as in
the FMA reference code, ``pd.read_csv(..., index_col=0, header=[0, 1])``; the columns used are
``('set', 'subset')`` (small ⊂ medium ⊂ large; "full" keeps every track), ``('set', 'split')``
(training | validation | test), ``('track', 'genre_top')`` (a top-level genre title, empty when a
track's genres span several trees) and ``('track', 'genres')`` (the genre ids the artist chose,
stored as a list string such as ``"[21, 811]"``). ``genres.csv`` has ``genre_id, #tracks, parent,
title, top_level`` (``parent`` 0 = a top-level genre). Audio is at
``{audio_root}/{tid[:3]}/{tid}.mp3`` with ``tid`` the track id zero-padded to 6 digits.

Tasks: ``genre`` (and ``genre-tree``, scored against the tree) → labels = [the top-level genre],
``genre-node`` → labels = the titles of the track's ``genres``; labels are canonical
(:func:`evalcore.vocab.normalize.normalize`). A track without a usable genre gets no labels, so
validation turns it into an error row.

``formats`` adds the derived formats of every item (``binary_choice``, ``true_false``; see
:func:`evalcore.datasets.factual_formats.derive_formats`) over the task's vocabulary — the 16
top-level genres, or every title of ``genres.csv`` for ``genre-node`` — seeded by ``format_seed``.
A binary-choice distractor is drawn only from the vocabulary labels that some track of the chosen
subset (and split; ``limit`` aside) has as its label: FMA-small holds 8 of the 16 top-level genres
(the factual paper's §4.3: "eight top-level genres: hip-hop, pop, folk, experimental, rock,
international, electronic, and instrumental"), and a distractor outside them would pose a question
the paper's Table 7 never posed.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Literal, Sequence

import pandas as pd

from evalcore.core import storage
from evalcore.datasets.base import DATASETS, BadItem, Dataset, DatasetContext, FactualVocabulary
from evalcore.datasets.factual_formats import BINARY_ORDERS, FORMATS, derive_formats
from evalcore.datasets.records import FileUnreadable
from evalcore.datasets.tabular import check_table, csv_frame, read_table, string_list, text, undecodable
from evalcore.core.params import Count, PathStr
from evalcore.vocab import normalize, vocabulary

SUBSETS = ("small", "medium", "large", "full")
SPLITS = ("training", "validation", "test")
TASKS = ("genre", "genre-tree", "genre-node")
DEFAULT_QUESTION = "What is the genre of this song?"


#: the columns of tracks.csv the loader reads
TRACK_COLUMNS = (("set", "subset"), ("set", "split"), ("track", "genre_top"), ("track", "genres"))


def read_tracks(uri: str) -> pd.DataFrame:
    """FMA ``tracks.csv`` (two header rows) as a DataFrame of strings indexed by track id; bytes that are not UTF-8
    kept as lone surrogates (that row's error, :func:`evalcore.datasets.tabular.undecodable`);
    :class:`~evalcore.datasets.records.FileUnreadable` naming ``tracks`` when it cannot be read as that table."""
    data = storage.read_bytes(uri)
    if not data.strip():
        raise FileUnreadable(f"tracks: {uri!r} is empty")
    try:
        misfits: list[int] = []
        df = csv_frame(data, misfits, header=[0, 1], index_col=0)
    except (ValueError, OSError) as e:  # pandas' parse errors are ValueErrors
        raise FileUnreadable(f"tracks: {uri!r} is not a readable FMA tracks.csv ({type(e).__name__}: "
                             f"{str(e).splitlines()[0][:160] if str(e) else ''})") from None
    missing = [c for c in TRACK_COLUMNS if c not in df.columns]
    if missing:
        raise FileUnreadable(f"tracks: {uri!r} lacks column(s) {missing} of FMA's tracks.csv")
    df.index = df.index.map(lambda v: str(v).strip())
    problems = [f"{uri}: a CSV line of {n} fields does not fit the header" for n in misfits]
    if not data.endswith(b"\n") and len(df):  # a released table ends with a line break: the last row is cut
        df = df.iloc[:-1]
        problems.append(f"{uri}: its last line has no line break (the file is cut short?); that row is left out as "
                        "this error")
    df.attrs["problems"] = problems
    out = df[df.index.str.fullmatch(r"\d+")]
    out.attrs["problems"] = df.attrs.get("problems", [])
    return out


def audio_path(audio_root: str, track_id: int) -> str:
    """Where FMA stores a track's mp3: ``{audio_root}/000/000002.mp3``."""
    tid = f"{track_id:06d}"
    return storage.join(audio_root, tid[:3], tid + ".mp3")


class GenreTree:
    """The FMA genre taxonomy from ``genres.csv``."""

    def __init__(self, df: pd.DataFrame) -> None:
        missing = {"genre_id", "parent", "title", "top_level"} - set(df.columns)
        if missing:
            raise ValueError(f"genres.csv lacks column(s) {sorted(missing)}")
        self.title: dict[str, str] = {}
        self.parent: dict[str, str] = {}
        for row in df.to_dict("records"):
            gid = _id(row["genre_id"])
            if gid is None:
                continue
            self.title[gid] = text(row["title"]) or gid
            self.parent[gid] = _id(row["parent"]) or "0"

    def path(self, gid: str) -> list[str]:
        """Titles from the top level down to ``gid`` (empty for an unknown id)."""
        out: list[str] = []
        seen: set[str] = set()
        while gid in self.title and gid not in seen:  # `seen` guards against a cyclic file
            seen.add(gid)
            out.append(self.title[gid])
            gid = self.parent.get(gid, "0")
        return out[::-1]


@DATASETS.register("fma")
class FMA(Dataset):
    """``tracks``/``genres``: the metadata CSVs; ``audio_root``: the ``fma_<subset>`` folder; ``binary_order``:
    ``balanced`` (exactly half of the binary-choice items name the truth first) or ``coin`` (a seeded coin per item)."""
    path_params = {"tracks": "file", "genres": "file", "audio_root": "dir"}  # must exist (evalcore validate)

    @classmethod
    def factual_vocabulary(cls, params: dict[str, Any]) -> FactualVocabulary:
        """The genre lexicon for the configured task, and ``genres.csv`` as the genre tree."""
        return FactualVocabulary(tasks={str(params.get("task", "genre")): "genre"}, tree=params.get("genres"))

    def __init__(self, tracks: PathStr, genres: PathStr, audio_root: PathStr, subset: Literal[SUBSETS] = "small",
                 split: Literal[SPLITS] | None = None, task: Literal[TASKS] = "genre",
                 question: str = DEFAULT_QUESTION, limit: Count | None = None,
                 formats: Sequence[Literal[FORMATS]] = ("standard",), format_seed: int = 0,
                 binary_order: Literal[BINARY_ORDERS] = "balanced") -> None:
        derive_formats([], formats, [], 0, binary_order)  # checks the format names and the order
        if subset not in SUBSETS:
            raise ValueError(f"subset must be one of {list(SUBSETS)}, got {subset!r}")
        if split is not None and split not in SPLITS:
            raise ValueError(f"split must be one of {list(SPLITS)} or None, got {split!r}")
        if task not in TASKS:
            raise ValueError(f"task must be one of {list(TASKS)}, got {task!r}")
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self.tracks, self.genres, self.audio_root = tracks, genres, audio_root
        self.subset, self.split, self.task, self.question, self.limit = subset, split, task, question, limit
        self.formats, self.format_seed, self.binary_order = list(formats), format_seed, binary_order

    @classmethod
    def check_files(cls, params: dict[str, Any]) -> None:
        """``tracks.csv`` and ``genres.csv`` read as FMA's tables (``evalcore validate``)."""
        read_tracks(str(params["tracks"]))
        check_table(str(params["genres"]), "genres", ("genre_id", "parent", "title", "top_level"))

    def items(self, ctx: DatasetContext) -> Iterator[dict[str, Any] | BadItem]:
        tree = GenreTree(read_table(self.genres))
        items = []
        for it in self._standard(tree, self.limit):
            if isinstance(it, BadItem):
                yield it  # a row that cannot be an item: its error row, before the items and their formats
            else:
                items.append(it)
        if self.formats == ["standard"]:
            yield from items
            return
        vocab = (list(dict.fromkeys(normalize(t, "genre") for t in tree.title.values())) if self.task == "genre-node"
                 else vocabulary(self.task))
        distractors = self._present(tree, vocab) if "binary_choice" in self.formats else None
        yield from derive_formats(items, self.formats, vocab, self.format_seed, self.binary_order, distractors)

    def _present(self, tree: GenreTree, vocab: Sequence[str]) -> list[str]:
        """The labels of ``vocab`` that some track of the subset (and split) has, whatever ``limit``: the
        binary-choice distractors, so that a limited run asks the same questions as a full one."""
        seen = {lab for it in self._standard(tree, limit=None) if isinstance(it, dict) for lab in it["labels"] or ()}
        return [v for v in vocab if v in seen]

    def _standard(self, tree: GenreTree, limit: int | None) -> Iterator[dict[str, Any] | BadItem]:
        """The factual items of the subset and split, at most ``limit`` (None: all)."""
        df = read_tracks(self.tracks)
        yield from map(BadItem, df.attrs.get("problems", []))
        keep = SUBSETS[: SUBSETS.index(self.subset) + 1]
        n = 0
        for tid, row in zip(df.index, df.to_dict("records")):
            if limit is not None and n >= limit:
                return
            subset = text(row.get(("set", "subset")))
            if self.subset != "full" and subset not in keep:
                continue
            split = text(row.get(("set", "split")))
            if self.split is not None and split != self.split:
                continue
            n += 1
            problem = undecodable({str(k): v for k, v in row.items()})
            problem = problem or (f"track id of {len(tid)} digits" if len(tid) > 18 else None)
            yield BadItem(f"FMA track {tid[:40]}: {problem}") if problem else self._item(int(tid), row, tree, subset, split)

    def _item(self, tid: int, row: dict, tree: GenreTree, subset: str | None, split: str | None) -> dict[str, Any]:
        ids = [g for g in (_id(x) for x in string_list(row.get(("track", "genres")))) if g is not None]
        paths = {g: tree.path(g) for g in ids}
        unknown = [g for g, p in paths.items() if not p]
        genre_top = text(row.get(("track", "genre_top")))
        if genre_top is None:  # FMA leaves genre_top empty unless the genres share one root
            roots = {p[0] for p in paths.values() if p}
            genre_top = roots.pop() if len(roots) == 1 else None
        if self.task == "genre-node":
            labels = list(dict.fromkeys(normalize(p[-1], "genre") for p in paths.values() if p)) or None
        else:
            labels = [normalize(genre_top, "genre")] if genre_top else None
        return {
            "item_id": f"{tid:06d}", "protocol": "factual", "task": self.task,
            "audio_uri": audio_path(self.audio_root, tid), "question": self.question, "labels": labels,
            "category": normalize(genre_top, "genre") if genre_top else None,
            "metadata": json.dumps({
                "track_id": tid, "subset": subset, "split": split, "genre_top": genre_top,
                "genre_ids": [int(g) for g in ids],
                "genre_paths": [[normalize(t, "genre") for t in p] for p in paths.values() if p],
                "unknown_genre_ids": [int(g) for g in unknown],
                "title": text(row.get(("track", "title"))), "artist": text(row.get(("artist", "name"))),
            }),
        }


def _id(v: Any) -> str | None:
    """A genre id cell ("21", "21.0", 21) as a canonical string, or None."""
    t = text(v)
    if t is None:
        return None
    try:
        return str(int(float(t)))
    except (ValueError, OverflowError):
        return None
