"""Canonical forms of ground-truth labels (the loaders' normalisation, paper §4.1)."""

from __future__ import annotations

from evalcore.vocab.extract import extract
from evalcore.vocab.labels import GM_PROGRAMS, lexicon_name
from evalcore.vocab.lexicon import LEXICONS, fold

__all__ = ["normalize"]


def normalize(label: str, task: str) -> str:
    """Canonical form of a ground-truth label of ``task`` (unknown labels: lowercased, trimmed).

    Genres: exact surface forms only ("Hip-Hop" → ``hip-hop``, "Old-Time / Historic"), no other
    normalisation (paper §4.1). Instruments: a General MIDI program number or a name containing
    exactly one vocabulary instrument ("Acoustic Grand Piano" → ``piano``, "French Horn" →
    ``horn``, "Contrabass" → ``bass``). Composers: a name containing exactly one composer
    ("Johann Sebastian Bach" → ``bach``, "Dvořák" → ``dvorak``).
    """
    name = lexicon_name(task)
    folded = fold(label)
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

