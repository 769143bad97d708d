"""Closed vocabularies and canonical forms of the factual tasks (FMA genres, MusicNet instruments/composers).

Canonical labels are lowercase. Synonym tables list only **exact mentions and spelling
variants** (rule 2 of the paper forbids guessing):

* Genres (the 16 FMA top-level genres): "hip hop"/"hiphop" → ``hip-hop``, "r&b"/"rnb"/"rhythm
  and blues"/"soul" → ``soul-rnb`` (both halves of the FMA label), "electronica"/"edm"
  (= electronic dance music) → ``electronic``, "old-time" → ``old-time / historic``,
  "spoken word" → ``spoken``. **Not** mapped: "rap" (a different word; a sub-genre of
  Hip-Hop in the FMA tree), "world music" (≠ International), "techno"/"punk" (sub-genres:
  naming them is not naming the top level), "bluesy"/"jazzy" (style). "classical guitar"
  and "drum and bass" are ignored phrases.
* Instruments (the 11 MusicNet instruments): the instrument lexicon's forms, restricted to this
  vocabulary (other instruments stay as *ignored* phrases, so "bass clarinet" still gives
  clarinet and "synth bass" nothing), plus a few misspellings ("violine", "chello",
  "harpsicord") and "fortepiano" → piano. Normalisation of the paper: piano variants → piano,
  horn variants → horn, contrabass / double bass → bass.
* Composers (the 10 MusicNet composers): simplest common form, accents stripped ("Dvořák" →
  ``dvorak``, "Fauré" → ``faure``); first names/initials need no entry ("J.S. Bach" contains
  "Bach"), possessives match ("Beethoven's"); common misspellings ("Beethovan", "Shubert").

This module is plain data plus the task → vocabulary maps; the :class:`~evalcore.vocab.lexicon.Lexicon`
objects are built in :mod:`evalcore.vocab.lexicon` (``LEXICONS["genre"|"composer"|"musicnet_instrument"]``).
"""

from __future__ import annotations

__all__ = [
    "TASKS", "FMA_GENRES", "GENRE_SYNONYMS", "GENRE_IGNORE", "MUSICNET_INSTRUMENTS",
    "INSTRUMENT_EXTRA", "GM_PROGRAMS", "MUSICNET_COMPOSERS", "COMPOSER_SYNONYMS", "GENRE_TREE_TASKS",
    "LEXICON_FAMILY", "lexicon_name", "vocabulary", "family", "task_family",
]

TASKS = ("genre", "genre-tree", "genre-node", "instrument", "composer")

FMA_GENRES = [
    "blues", "classical", "country", "easy listening", "electronic", "experimental", "folk",
    "hip-hop", "instrumental", "international", "jazz", "old-time / historic", "pop", "rock",
    "soul-rnb", "spoken",
]

GENRE_SYNONYMS: dict[str, list[str]] = {
    "blues": ["blues music"],
    "classical": ["classical music"],
    "country": ["country music", "country and western"],
    "easy listening": ["easy listening music"],
    "electronic": ["electronica", "electronic music", "electronic dance music", "edm"],
    "experimental": ["experimental music"],
    "folk": ["folk music"],
    "hip-hop": ["hip hop", "hiphop", "hip-hop music"],
    "instrumental": ["instrumental music"],
    "international": ["international music"],
    "jazz": ["jazz music"],
    "old-time / historic": ["old-time/historic", "old-time", "oldtime", "old-timey"],
    "pop": ["pop music"],
    "rock": ["rock music", "rock and roll", "rock 'n' roll", "rock n roll", "rock'n'roll"],
    "soul-rnb": ["soul", "soul music", "r&b", "rnb", "r'n'b", "r and b", "rhythm and blues",
                 "soul/r&b", "soul rnb", "soul & rnb"],
    "spoken": ["spoken word", "spoken-word"],
}
GENRE_IGNORE = ["classical guitar", "drum and bass", "drum & bass", "country of origin"]

MUSICNET_INSTRUMENTS = [
    "piano", "harpsichord", "violin", "viola", "cello", "bass", "horn", "oboe", "bassoon",
    "clarinet", "flute",
]
#: extra surface forms on top of the instrument lexicon (misspellings, variants)
INSTRUMENT_EXTRA: dict[str, list[str]] = {
    "piano": ["fortepiano", "piano forte", "acoustic grand piano", "bright acoustic piano",
              "electric grand piano", "honky-tonk piano"],
    "violin": ["violine"],
    "cello": ["chello", "violincello", "violoncelli"],
    "bass": ["doublebass", "contra bass"],
    "horn": ["natural horn", "valve horn"],
    "harpsichord": ["harpsicord"],
    "bassoon": ["basoon"],
    "clarinet": ["clarinette"],
}
#: General MIDI programs (1-based) of the MusicNet label CSVs
GM_PROGRAMS = {1: "piano", 7: "harpsichord", 41: "violin", 42: "viola", 43: "cello", 44: "bass",
               61: "horn", 69: "oboe", 71: "bassoon", 72: "clarinet", 74: "flute"}

MUSICNET_COMPOSERS = [
    "bach", "beethoven", "brahms", "cambini", "dvorak", "faure", "haydn", "mozart", "ravel", "schubert",
]
COMPOSER_SYNONYMS: dict[str, list[str]] = {
    "bach": [],
    "beethoven": ["beethovan", "bethoven"],
    "brahms": ["brahm"],
    "cambini": [],
    "dvorak": ["dvořák", "dvorák", "dvořak", "dvorjak"],
    "faure": ["fauré"],
    "haydn": ["hayden"],
    "mozart": [],
    "ravel": [],
    "schubert": ["shubert"],
}

#: the tasks whose rows a genre tree widens (every genre of the tree; ``genre-tree`` credits the top level)
GENRE_TREE_TASKS = ("genre-tree", "genre-node")
#: lexicon name → the family of labels it holds
LEXICON_FAMILY = {"instrument": "instrument", "musicnet_instrument": "instrument", "genre": "genre",
                  "composer": "composer"}
_DERIVED_SUFFIXES = ("-binary", "-true-false")
_FAMILIES = ("instrument", "genre", "composer")

_LEXICON_OF_TASK = {"genre": "genre", "genre-tree": "genre", "genre-node": "genre",
                    "instrument": "musicnet_instrument", "composer": "composer"}


def lexicon_name(task: str) -> str:
    """Name in ``LEXICONS`` of the built-in lexicon of ``task``."""
    try:
        return _LEXICON_OF_TASK[task]
    except KeyError:
        raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}") from None


def vocabulary(task: str) -> list[str]:
    """The closed vocabulary (canonical labels) of ``task``."""
    name = lexicon_name(task)
    return list({"genre": FMA_GENRES, "musicnet_instrument": MUSICNET_INSTRUMENTS,
                 "composer": MUSICNET_COMPOSERS}[name])


def family(task: str | None) -> str:
    """The label family of a factual task: ``genre`` for ``genre``/``genre-tree``/``genre-node``, else
    ``instrument`` or ``composer``; ValueError for any other task."""
    t = task or ""
    if t.startswith("genre"):
        return "genre"
    if t in _FAMILIES:
        return t
    raise ValueError(f"no factual label family (prompts, questions) for task {task!r}; known: genre[-tree|-node], "
                     "instrument, composer")


def task_family(task: str) -> str | None:
    """``genre`` / ``instrument`` / ``composer`` for a factual task (derived-format suffixes ignored), else None."""
    for suffix in _DERIVED_SUFFIXES:
        if task.endswith(suffix):
            task = task[: -len(suffix)]
    if task.startswith("genre"):
        return "genre"
    return task if task in ("instrument", "composer") else None
