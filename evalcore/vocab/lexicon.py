"""Lexicons: each canonical label of a closed vocabulary with its surface forms, and the built-in ones.

A :class:`Lexicon` matches surface forms as whole words, leftmost-longest, with automatic plurals
(rules 1-3 of :mod:`evalcore.vocab.extract`); ``ignore`` phrases are matched but give no label.
:data:`LEXICONS` names the built-in lexicons: ``instrument`` (the general one below), ``genre`` (the 16
FMA top-level genres), ``composer`` and ``musicnet_instrument`` (the MusicNet vocabularies), built from
the data and decisions of :mod:`evalcore.vocab.labels`. :func:`restrict` keeps part of a lexicon.

Decisions for :data:`INSTRUMENT_LEXICON`:

* ``percussion`` is **not** mapped to ``drums``: percussion also covers shakers, tambourine,
  congas or timpani, so crediting drums would be an inference (rule 2 of the paper). Drum-kit
  parts (snare, kick drum, bass drum, hi-hat) and "drum machine" *are* drums.
* "double bass", "contrabass", "upright bass", "bass guitar", "electric bass" → ``bass``
  (the paper's normalisation); "bass clarinet/flute/saxophone" → the woodwind.
* "english horn"/"cor anglais" (a woodwind), "viola da gamba", "car horn", "voice leading"
  and the genre "drum and bass" are ignored rather than mapped.
* "synth bass" is a ``synthesizer`` (the instrument heard), not ``bass``.
* Players count as mentions of their instrument ("drummer", "pianist", "cellist"), singing
  and singers as ``vocals``; "strings", "brass", "keyboard" are families and give nothing.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Annotated, Mapping, Sequence

from pydantic import AfterValidator

from evalcore.vocab.labels import (COMPOSER_SYNONYMS, GENRE_IGNORE, GENRE_SYNONYMS, INSTRUMENT_EXTRA,
                                   MUSICNET_INSTRUMENTS)

__all__ = [
    "Lexicon", "INSTRUMENT_LEXICON", "GENRE_LEXICON", "COMPOSER_LEXICON", "MUSICNET_INSTRUMENT_LEXICON",
    "LEXICONS", "LexiconName", "VocabularyName", "fold", "restrict",
]


def _plural(form: str) -> str:
    """English plural of the last word of ``form`` (regular rules only)."""
    head, _, last = form.rpartition(" ")
    if re.search(r"(s|x|z|ch|sh)$", last):
        last += "es"
    elif re.search(r"[^aeiou]y$", last):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def _norm(form: str) -> str:
    """Lowercase, hyphens and runs of whitespace → one space."""
    return re.sub(r"[\s\-]+", " ", form.strip().lower())


@dataclass(frozen=True)
class Lexicon:
    """canonical label -> surface forms (synonyms, variants). Plurals handled automatically.

    The canonical label itself is always a surface form. ``ignore`` lists phrases that are
    matched (so that they block shorter forms inside them) but produce no label.
    """

    synonyms: Mapping[str, Sequence[str]]
    name: str = "custom"
    ignore: Sequence[str] = ()
    _forms: dict = field(init=False, repr=False, compare=False)
    _pattern: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        explicit: dict[str, str | None] = {}

        def add(form: str, label: str | None) -> None:
            key = _norm(form)
            if key in explicit and explicit[key] != label:
                raise ValueError(
                    f"lexicon {self.name!r}: {form!r} maps to both {explicit[key]!r} and {label!r}"
                )
            explicit[key] = label

        for label, forms in self.synonyms.items():
            for form in (label, *forms):
                add(form, label)
        for form in self.ignore:
            add(form, None)
        # automatic plurals never override an explicit form
        forms = dict(explicit)
        for key, label in explicit.items():
            forms.setdefault(_plural(key), label)

        alternatives = sorted(forms, key=len, reverse=True)  # longest first
        body = "|".join(r"[\s\-]+".join(map(re.escape, k.split(" "))) for k in alternatives)
        pattern = re.compile(rf"(?<![\w'])(?:{body})(?![\w])", re.IGNORECASE)
        object.__setattr__(self, "_forms", forms)
        object.__setattr__(self, "_pattern", pattern)

    @property
    def labels(self) -> list[str]:
        """The closed vocabulary (canonical labels)."""
        return list(self.synonyms)

    def mentions(self, text: str) -> list[tuple[int, int, str | None]]:
        """(start, end, label) of every surface-form match, leftmost-longest; label None = ignored."""
        return [(m.start(), m.end(), self._forms[_norm(m.group())]) for m in self._pattern.finditer(text)]


def fold(text: str) -> str:
    """Lowercase, strip accents, collapse whitespace."""
    text = unicodedata.normalize("NFKD", text.strip().lower())
    text = "".join(c for c in text if not unicodedata.combining(c))
    return re.sub(r"\s+", " ", text)


def restrict(lexicon: Lexicon, labels: Sequence[str], extra: Mapping[str, Sequence[str]] | None = None,
             name: str | None = None) -> Lexicon:
    """A lexicon of the same class keeping only ``labels`` (plus ``extra`` synonyms).

    Surface forms of dropped labels become ignored phrases (they still block shorter forms inside
    them and count as mentions for comparatives), except where a kept label claims them.
    Labels unknown to ``lexicon`` get their own name (and ``extra``) as surface forms.
    """
    extra = extra or {}
    synonyms = {lab: [*lexicon.synonyms.get(lab, ()), *extra.get(lab, ())] for lab in labels}
    claimed = {fold(f).replace("-", " ") for lab, forms in synonyms.items() for f in (lab, *forms)}
    dropped = [f for lab, forms in lexicon.synonyms.items() if lab not in synonyms for f in (lab, *forms)]
    ignore = [f for f in (*lexicon.ignore, *dropped) if fold(f).replace("-", " ") not in claimed]
    return type(lexicon)(synonyms=synonyms, ignore=ignore, name=name or lexicon.name)


INSTRUMENT_LEXICON = Lexicon(
    name="instrument",
    synonyms={
        "guitar": [
            "acoustic guitar", "electric guitar", "classical guitar", "nylon guitar",
            "steel guitar", "slide guitar", "rhythm guitar", "lead guitar", "guitarist",
            "plucked string", "plucked strings",
        ],
        "drums": [
            "drum", "drum kit", "drumkit", "drum set", "drumset", "drummer", "drumming",
            "drum machine", "snare", "snare drum", "kick drum", "bass drum", "hi-hat", "hihat",
        ],
        "bass": [
            "bass guitar", "electric bass", "double bass", "contrabass", "upright bass",
            "string bass", "acoustic bass", "bassline", "bass line", "bassist",
        ],
        "organ": [
            "hammond", "hammond organ", "organ pad", "pipe organ", "church organ",
            "electric organ", "organist",
        ],
        "flute": ["flautist", "flutist", "bass flute", "alto flute"],
        "piano": [
            "grand piano", "upright piano", "electric piano", "acoustic piano", "rhodes",
            "pianist", "pianoforte",
        ],
        "violin": ["violinist", "fiddle", "fiddler"],
        "viola": ["violist"],
        "cello": ["violoncello", "cellist", "celli"],
        "harpsichord": ["harpsichordist", "cembalo"],
        "horn": ["french horn", "horn section", "horn player"],
        "oboe": ["oboist"],
        "bassoon": ["contrabassoon", "bassoonist"],
        "clarinet": ["bass clarinet", "clarinetist", "clarinettist"],
        "trumpet": ["trumpeter", "trumpet player"],
        "saxophone": [
            "sax", "saxophonist", "tenor sax", "alto sax", "baritone sax", "bass saxophone",
        ],
        "synthesizer": ["synth", "synthesiser", "synth pad", "synth lead", "synth bass"],
        "vocals": [
            "vocal", "vocalist", "singer", "singing", "sung", "voice", "lead vocals",
            "backing vocals", "choir", "rapper", "rapping", "vocalization",
        ],
    },
    ignore=[
        "english horn", "cor anglais", "viola da gamba", "car horn", "voice leading",
        "drum and bass", "drum & bass", "drum n bass", "drum 'n' bass", "bass trombone",
    ],
)

# FMA genres and MusicNet instruments/composers: data and decisions in evalcore.vocab.labels
GENRE_LEXICON = Lexicon(name="genre", synonyms=GENRE_SYNONYMS, ignore=GENRE_IGNORE)
COMPOSER_LEXICON = Lexicon(name="composer", synonyms=COMPOSER_SYNONYMS)
MUSICNET_INSTRUMENT_LEXICON = restrict(
    INSTRUMENT_LEXICON, MUSICNET_INSTRUMENTS, INSTRUMENT_EXTRA, name="musicnet_instrument"
)

LEXICONS: dict[str, Lexicon] = {
    "instrument": INSTRUMENT_LEXICON,
    "genre": GENRE_LEXICON,
    "composer": COMPOSER_LEXICON,
    "musicnet_instrument": MUSICNET_INSTRUMENT_LEXICON,
}


def _lexicon_name(v: str, auto: bool = False) -> str:
    """``v`` if it names a lexicon (or is ``auto`` where allowed); else a ValueError with a suggestion."""
    known = (["auto"] if auto else []) + sorted(LEXICONS)
    if v not in known:
        close = difflib.get_close_matches(v, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown vocabulary {v!r}; {hint}known: {', '.join(known)}")
    return v


#: a lexicon name, as a judge's params take it (checked by ``evalcore validate``: evalcore.core.params)
LexiconName = Annotated[str, AfterValidator(_lexicon_name)]
#: a lexicon name or ``auto`` (each row's lexicon from its task)
VocabularyName = Annotated[str, AfterValidator(lambda v: _lexicon_name(v, auto=True))]
