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

This module is plain data plus helpers; the :class:`~evalcore.judges.lexicon.Lexicon` objects are
built in :mod:`evalcore.judges.lexicon` (``LEXICONS["genre"|"composer"|"musicnet_instrument"]``).
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = [
    "TASKS", "FMA_GENRES", "GENRE_SYNONYMS", "GENRE_IGNORE", "MUSICNET_INSTRUMENTS",
    "INSTRUMENT_EXTRA", "GM_PROGRAMS", "MUSICNET_COMPOSERS", "COMPOSER_SYNONYMS",
    "lexicon_name", "vocabulary", "normalize", "restrict", "read_vocab_file", "read_genre_tree",
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


def _fold(text: str) -> str:
    """Lowercase, strip accents, collapse whitespace."""
    text = unicodedata.normalize("NFKD", text.strip().lower())
    text = "".join(c for c in text if not unicodedata.combining(c))
    return re.sub(r"\s+", " ", text)


def normalize(label: str, task: str) -> str:
    """Canonical form of a ground-truth label of ``task`` (unknown labels: lowercased, trimmed).

    Genres: exact surface forms only ("Hip-Hop" → ``hip-hop``, "Old-Time / Historic"), no other
    normalisation (paper §4.1). Instruments: a General MIDI program number or a name containing
    exactly one vocabulary instrument ("Acoustic Grand Piano" → ``piano``, "French Horn" →
    ``horn``, "Contrabass" → ``bass``). Composers: a name containing exactly one composer
    ("Johann Sebastian Bach" → ``bach``, "Dvořák" → ``dvorak``).
    """
    from evalcore.judges.lexicon import LEXICONS, extract  # lazy: lexicon imports this module

    name = lexicon_name(task)
    folded = _fold(label)
    if name == "musicnet_instrument" and folded.isdigit():
        return GM_PROGRAMS.get(int(folded), folded)
    lexicon = LEXICONS[name]
    if name == "genre":
        stripped = label.strip()
        spans = lexicon.mentions(stripped)
        if len(spans) == 1 and spans[0][2] is not None and spans[0][:2] == (0, len(stripped)):
            return spans[0][2]
        return folded
    found = extract(label, lexicon) or extract(folded, lexicon)
    return found[0] if len(found) == 1 else folded


def restrict(lexicon: Any, labels: Sequence[str], extra: Mapping[str, Sequence[str]] | None = None,
             name: str | None = None) -> Any:
    """A lexicon of the same class keeping only ``labels`` (plus ``extra`` synonyms).

    Surface forms of dropped labels become ignored phrases (they still block shorter forms inside
    them and count as mentions for comparatives), except where a kept label claims them.
    Labels unknown to ``lexicon`` get their own name (and ``extra``) as surface forms.
    """
    extra = extra or {}
    synonyms = {lab: [*lexicon.synonyms.get(lab, ()), *extra.get(lab, ())] for lab in labels}
    claimed = {_fold(f).replace("-", " ") for lab, forms in synonyms.items() for f in (lab, *forms)}
    dropped = [f for lab, forms in lexicon.synonyms.items() if lab not in synonyms for f in (lab, *forms)]
    ignore = [f for f in (*lexicon.ignore, *dropped) if _fold(f).replace("-", " ") not in claimed]
    return type(lexicon)(synonyms=synonyms, ignore=ignore, name=name or lexicon.name)


def read_vocab_file(path: str | Path) -> dict[str, list[str]]:
    """Vocabulary file → {canonical label: [synonyms]}.

    JSON: a list of labels or an object {label: [synonyms]}. Text: one label per line, optionally
    ``label: synonym, synonym``; blank lines and lines starting with ``#`` are skipped.
    Labels are lowercased; raises ``ValueError`` on a malformed or empty file.
    """
    text = Path(path).read_text(encoding="utf-8")
    out: dict[str, list[str]] = {}
    if Path(path).suffix.lower() == ".json":
        data = json.loads(text)
        if isinstance(data, list) and all(isinstance(x, str) for x in data):
            out = {x.strip().lower(): [] for x in data}
        elif isinstance(data, dict) and all(
                isinstance(v, list) and all(isinstance(s, str) for s in v) for v in data.values()):
            out = {k.strip().lower(): [s.strip() for s in v] for k, v in data.items()}
        else:
            raise ValueError(f"{path}: expected a JSON list of labels or an object label -> [synonyms]")
    else:
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            label, _, rest = line.partition(":")
            out[label.strip().lower()] = [s.strip() for s in rest.split(",") if s.strip()]
    out.pop("", None)
    if not out:
        raise ValueError(f"{path}: no labels")
    return out


def read_genre_tree(uri: str | Path) -> dict[str, str]:
    """Genre tree {genre: top-level genre} in canonical forms, from FMA ``genres.csv`` or a JSON object
    {genre: top-level genre}; local path or ``s3://``. Raises ``ValueError`` on another shape."""
    from evalcore import storage

    text = storage.read_bytes(str(uri)).decode("utf-8")
    if str(uri).lower().endswith(".json"):
        data = json.loads(text)
        if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
            raise ValueError(f"{uri}: expected a JSON object genre -> top-level genre")
        pairs = list(data.items())
    else:
        rows = list(csv.DictReader(io.StringIO(text)))
        if not rows or not {"genre_id", "title", "top_level"} <= set(rows[0]):
            raise ValueError(f"{uri}: expected FMA genres.csv columns genre_id, parent, title, top_level")
        title = {r["genre_id"].strip(): r["title"] for r in rows}
        pairs = [(r["title"], title.get(r["top_level"].strip(), r["title"])) for r in rows]
    return {normalize(g, "genre"): normalize(top, "genre") for g, top in pairs}
