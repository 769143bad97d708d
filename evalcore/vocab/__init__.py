"""Vocabularies: the closed label sets of the factual tasks, their surface forms, normalisation and genre trees.

The bottom layer of the data flow (docs/layers.md): loaders bring ground-truth labels to canonical form with
it, protocols list a vocabulary in prompts, judges extract labels into it, the preflight checks that a
configured vocabulary fits its task. It imports no other evalcore package (only :mod:`evalcore.core.storage`, to read
a genre tree).

* :mod:`evalcore.vocab.labels` — the FMA genres, MusicNet instruments and composers, their synonyms, and the
  task → vocabulary maps.
* :mod:`evalcore.vocab.lexicon` — :class:`Lexicon` (surface forms → canonical labels) and the built-in
  :data:`LEXICONS`.
* :mod:`evalcore.vocab.extract` — :func:`extract`, the deterministic extraction rules (negation, comparatives).
* :mod:`evalcore.vocab.normalize` — :func:`normalize`, ground-truth labels to canonical form.
* :mod:`evalcore.vocab.files` — vocabulary files and genre trees.
* :mod:`evalcore.vocab.tasks` — the lexicon of each row's task, and whether a vocabulary fits a task.
"""

from __future__ import annotations

from evalcore.vocab.extract import extract
from evalcore.vocab.files import read_genre_tree, read_vocab_file
from evalcore.vocab.labels import (COMPOSER_SYNONYMS, FMA_GENRES, GENRE_IGNORE, GENRE_SYNONYMS, GENRE_TREE_TASKS,
                                   GM_PROGRAMS, INSTRUMENT_EXTRA, LEXICON_FAMILY, MUSICNET_COMPOSERS,
                                   MUSICNET_INSTRUMENTS, TASKS, family, lexicon_name, task_family, vocabulary)
from evalcore.vocab.lexicon import (COMPOSER_LEXICON, GENRE_LEXICON, INSTRUMENT_LEXICON, LEXICONS,
                                    MUSICNET_INSTRUMENT_LEXICON, Lexicon, LexiconName, VocabularyName, fold,
                                    restrict)
from evalcore.vocab.normalize import normalize
from evalcore.vocab.tasks import TaskLexicons, misfit

__all__ = [
    "TASKS", "FMA_GENRES", "GENRE_SYNONYMS", "GENRE_IGNORE", "MUSICNET_INSTRUMENTS", "INSTRUMENT_EXTRA",
    "GM_PROGRAMS", "MUSICNET_COMPOSERS", "COMPOSER_SYNONYMS", "GENRE_TREE_TASKS", "LEXICON_FAMILY",
    "lexicon_name", "vocabulary", "family", "task_family",
    "Lexicon", "INSTRUMENT_LEXICON", "GENRE_LEXICON", "COMPOSER_LEXICON", "MUSICNET_INSTRUMENT_LEXICON",
    "LEXICONS", "LexiconName", "VocabularyName", "fold", "restrict",
    "extract", "normalize", "read_vocab_file", "read_genre_tree", "TaskLexicons", "misfit",
]
