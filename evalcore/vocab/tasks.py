"""Which lexicon a row of a factual task reads into, and whether a configured vocabulary can hold a task's labels.

:class:`TaskLexicons` is the choice the ``lexicon`` judge makes per row (:mod:`evalcore.judges.lexicon`); the
label checks of a run's items (:mod:`evalcore.protocols.checks`) make the same choice to know which labels a
row can ever be credited with. :func:`misfit` is the vocabulary-fit rule of the preflight
(:mod:`evalcore.runconfig.preflight`): a named lexicon of another label family, or a list sharing no label with the task's
vocabulary, cannot fit the task.
"""

from __future__ import annotations

from typing import Any

from evalcore.vocab.files import read_genre_tree
from evalcore.vocab.labels import FMA_GENRES, GENRE_TREE_TASKS, LEXICON_FAMILY, lexicon_name, task_family
from evalcore.vocab.lexicon import GENRE_LEXICON, LEXICONS, Lexicon, LexiconName, VocabularyName, restrict

__all__ = ["TaskLexicons", "misfit"]


class TaskLexicons:
    """The lexicon of each row's task.

    ``vocabulary``: a name in :data:`~evalcore.vocab.lexicon.LEXICONS`, or ``"auto"`` — each row's lexicon from
    its task: ``tasks`` (task → lexicon name), else the built-in map (:func:`evalcore.vocab.labels.lexicon_name`);
    a row whose task has no vocabulary (none, or unknown) uses ``fallback`` if given, else raises ValueError.
    ``tree`` (FMA ``genres.csv`` or a JSON {genre: top-level}) widens the genre lexicon to every genre of the
    tree for ``genre-tree`` and ``genre-node`` rows.
    """

    def __init__(self, vocabulary: VocabularyName = "instrument", tree: str | None = None,
                 tasks: dict[str, LexiconName] | None = None, fallback: LexiconName | None = None) -> None:
        if vocabulary != "auto" and vocabulary not in LEXICONS:
            raise KeyError(
                f"unknown vocabulary {vocabulary!r}; known: auto, {', '.join(sorted(LEXICONS))}"
            )
        unknown = sorted(set((tasks or {}).values()) - set(LEXICONS) | ({fallback} - set(LEXICONS) - {None}))
        if unknown:
            raise KeyError(f"tasks: unknown vocabulary {unknown}; known: {', '.join(sorted(LEXICONS))}")
        self.vocabulary = vocabulary
        self.tasks = dict(tasks or {})
        self.fallback = fallback
        self.lexicon = LEXICONS.get(vocabulary)
        self.tree = read_genre_tree(tree) if tree else {}
        self._tree_lexicon = (restrict(GENRE_LEXICON, list(dict.fromkeys(
            [*FMA_GENRES, *self.tree, *self.tree.values()])), name="genre+tree") if self.tree else None)

    def _lexicon(self, task: str | None) -> Lexicon:
        """The lexicon of a row of ``task`` (raises ValueError for an unknown task under "auto")."""
        if task in GENRE_TREE_TASKS and self._tree_lexicon is not None and (
                self.vocabulary == "auto" or self.lexicon is GENRE_LEXICON):
            return self._tree_lexicon
        if self.lexicon is not None:
            return self.lexicon
        if task in self.tasks:
            return LEXICONS[self.tasks[task]]
        try:
            return LEXICONS[lexicon_name(str(task))]
        except ValueError:
            if self.fallback is None:
                raise
            return LEXICONS[self.fallback]

    def labels_for(self, task: str | None) -> list[str]:
        """The canonical labels a row of ``task`` can be credited with (ValueError: unknown task under "auto")."""
        return list(self._lexicon(task).labels)


def misfit(value: Any, task: str, lexicon: str) -> str | None:
    """Why ``value`` (a lexicon name or a label list) cannot hold the labels of ``task``, whose labels are the
    ``lexicon`` vocabulary; None when it can (``auto`` fits every task; unknown names are reported by the judge's
    own check)."""
    family = task_family(task) or LEXICON_FAMILY.get(lexicon)
    if isinstance(value, str):
        if value == "auto" or value not in LEXICON_FAMILY:
            return None
        if LEXICON_FAMILY[value] != family:
            return f"{value!r} holds {LEXICON_FAMILY[value]} labels"
        return None
    if isinstance(value, (list, tuple)) and lexicon in LEXICONS:
        labels = {str(v).strip().lower() for v in value}
        if not labels & {lab.lower() for lab in LEXICONS[lexicon].labels}:
            return "the list shares no label with it"
    return None
