"""Deterministic label extraction against a closed vocabulary (the factual protocol's judge).

This is a rule-based stand-in for the LLM extractor of "Factual and musical metrics for
Music LMs" (§4.1, Appendix B.1). It follows the same rules, deterministically:

1. **Explicit mentions only.** A label is returned only if one of its surface forms appears
   in the text as a whole word/phrase (case-insensitive; a space inside a surface form also
   matches a hyphen or several spaces). Nothing is inferred from style ("swing" ≠ jazz), and a
   hyphenated ``-like``/``-esque``/``-ish`` suffix ("a piano-like timbre") is not a mention.
2. **Longest match wins.** Surface forms are matched leftmost-longest, so "bass guitar" and
   "double bass" give ``bass`` (not ``guitar``), "bass clarinet" gives ``clarinet`` (not
   ``bass``) and "bass drum" gives ``drums``. A lexicon may also list *ignored* phrases that
   are consumed without producing a label ("drum and bass" the genre, "english horn").
3. **Canonical forms and plurals.** Each surface form maps to its canonical label; the plural
   of every surface form (last word + s / es / ies) is added automatically.
4. **Negation.** A mention is dropped when it is negated:

   * *before it*: a negation cue (``no``, ``not``, ``never``, ``without``, ``neither``,
     ``nor``, ``none``, ``cannot``, any ``…n't`` such as ``isn't``/``can't hear``, ``lack(s)``,
     ``absence of``, ``free of``, ``devoid of``) stands at most five words earlier in the same
     clause, with no punctuation, no other mention and no contrast word (``but``, ``only``,
     ``except``, ``besides``, ``other``, ``than``, ...) in between. Hedges are not
     negations: ``not sure``, ``not certain``, ``not clear``, ``not only``, ``not just``,
     ``no doubt``, ``don't know``, ``can't tell``.
   * *after it*: "X is not present/heard/audible/used/played/included", "X is absent/missing",
     "X cannot be heard", "X doesn't play/appear", "X: none".

   A negation covers a whole coordinated list: "no drums, guitars or bass" drops all three,
   "neither piano nor violin" both. Items of a list are mentions separated only by ``,`` ``/``
   ``&`` ``and`` ``or`` ``plus`` ``as well as``, articles, hedges (``maybe``, ``possibly``) and
   at most one modifier word right before the next item ("no drums or distorted guitars").
   Consequence (documented limit): "no vocals and piano" drops both.
5. **Comparatives.** Only the preferred entity is kept: "X rather than Y", "X instead of Y",
   "X as opposed to Y" drop Y; "than" drops what follows it when the clause before it holds a
   mention and ``more``/``rather``/``closer`` ("more like a viola than a violin",
   "guitar more than piano"). Plain comparisons ("the piano is louder than the drums") keep
   both, and "more than two guitars" keeps the guitars.
6. **Dedupe, order.** Labels are returned once each, in order of first non-negated mention;
   the empty list when nothing is mentioned.

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

import bisect
import re
from dataclasses import dataclass, field
from typing import Annotated, Mapping, Sequence

from pydantic import AfterValidator

from evalcore.judges import vocab as _vocab
from evalcore.registry import JUDGES

__all__ = [
    "Lexicon", "INSTRUMENT_LEXICON", "GENRE_LEXICON", "COMPOSER_LEXICON", "MUSICNET_INSTRUMENT_LEXICON",
    "LEXICONS", "extract", "LexiconJudge",
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

# FMA genres and MusicNet instruments/composers: data and decisions in evalcore.judges.vocab
GENRE_LEXICON = Lexicon(name="genre", synonyms=_vocab.GENRE_SYNONYMS, ignore=_vocab.GENRE_IGNORE)
COMPOSER_LEXICON = Lexicon(name="composer", synonyms=_vocab.COMPOSER_SYNONYMS)
MUSICNET_INSTRUMENT_LEXICON = _vocab.restrict(
    INSTRUMENT_LEXICON, _vocab.MUSICNET_INSTRUMENTS, _vocab.INSTRUMENT_EXTRA, name="musicnet_instrument"
)

LEXICONS: dict[str, Lexicon] = {
    "instrument": INSTRUMENT_LEXICON,
    "genre": GENRE_LEXICON,
    "composer": COMPOSER_LEXICON,
    "musicnet_instrument": MUSICNET_INSTRUMENT_LEXICON,
}


def _lexicon_name(v: str, auto: bool = False) -> str:
    """``v`` if it names a lexicon (or is ``auto`` where allowed); else a ValueError with a suggestion."""
    import difflib

    known = (["auto"] if auto else []) + sorted(LEXICONS)
    if v not in known:
        close = difflib.get_close_matches(v, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown vocabulary {v!r}; {hint}known: {', '.join(known)}")
    return v


#: a lexicon name, as a judge's params take it (checked by ``evalcore validate``: evalcore.params)
LexiconName = Annotated[str, AfterValidator(_lexicon_name)]
#: a lexicon name or ``auto`` (each row's lexicon from its task)
VocabularyName = Annotated[str, AfterValidator(lambda v: _lexicon_name(v, auto=True))]

# --- negation / comparative machinery -------------------------------------------------------

_TRIGGER = re.compile(
    r"\b(?:no|not|never|without|neither|nor|none|cannot|lacks?|lacking|absence\s+of|"
    r"free\s+of|devoid\s+of|instead\s+of|rather\s+than|as\s+opposed\s+to|\w+n't)\b",
    re.IGNORECASE,
)
# hedges and idioms that look like negation cues but are not
_NOT_A_TRIGGER = re.compile(
    r"(?:no\s+(?:doubt|matter|question)|not\s+(?:only|just|sure|certain|clear|entirely|quite\s+sure)"
    r"|\w+n't\s+(?:know|tell|be\s+sure))\b",
    re.IGNORECASE,
)
_THAN = re.compile(r"(?<!rather )\bthan\b", re.IGNORECASE)
_PREFERENCE = re.compile(r"\b(?:more|rather|closer)\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[.;:!?\n()\[\],]")
_BREAK_WORDS = {
    "but", "however", "although", "though", "whereas", "while", "yet", "only", "just",
    "except", "besides", "apart", "aside", "other", "instead", "than", "rather", "also",
}
_CONNECTORS = {
    "and", "or", "plus", "as", "well", "a", "an", "any", "some", "even", "either",
    "maybe", "possibly", "perhaps", "probably",
}
_STOP = {
    "the", "this", "that", "these", "those", "it", "its", "their", "his", "her", "is", "are",
    "was", "were", "be", "has", "have", "had", "with", "there", "which", "who", "in", "on",
    "of", "to", "by", "for", "at", "from", "no", "not", "nor", "neither", "without", "never",
    # contractions start a new clause, they are not a modifier ("not rock, it's pop")
    "it's", "that's", "there's", "here's", "i'm", "i'd", "we're", "they're",
}
_POST_NEGATION = re.compile(
    r"\s*(?:(?:is|are|was|were)\s*(?:not|n't|never)\s+(?:\w+\s+)?"
    r"(?:present|heard|audible|used|played|playing|included|featured|there|detectable)"
    r"|(?:do|does|did)\s*(?:not|n't)\s+(?:\w+\s+)?(?:play|appear|feature)"
    r"|(?:can|could)\s*(?:not|n't)\s+be\s+(?:heard|detected)"
    r"|(?:is|are|was|were)\s+(?:\w+ly\s+)?(?:absent|missing|nowhere)"
    r"|[:\-\u2013]\s*(?:none|no|absent|missing))\b",
    re.IGNORECASE,
)
_LIKE_SUFFIX = re.compile(r"-(?:like|esque|ish)\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z']+|[^\sa-z']", re.IGNORECASE)


def _is_list_gap(gap: str) -> bool:
    """True if ``gap`` only joins two items of one list ("," "and" "or", one modifier, ...)."""
    tokens = _WORD.findall(gap.lower())
    free = 0
    for i, tok in enumerate(tokens):
        if tok in {",", "/", "&", "+"} or tok in _CONNECTORS:
            if free:  # a modifier must sit right before the next item
                return False
            continue
        if not tok[0].isalpha() or tok in _STOP or tok in _BREAK_WORDS or _TRIGGER.fullmatch(tok):
            return False
        free += 1
        if free > 1:
            return False
    return True


def _triggers(text: str, mentions: list[tuple[int, int, str | None]]) -> list[int]:
    """End offsets of the negation cues in ``text`` (see module docstring)."""
    ends = [m.end() for m in _TRIGGER.finditer(text) if not _NOT_A_TRIGGER.match(text, m.start())]
    for m in _THAN.finditer(text):
        clause_start = max((c.end() for c in _CLAUSE_END.finditer(text, 0, m.start())
                            if c.group() != ","), default=0)
        before = text[clause_start:m.start()]
        if _PREFERENCE.search(before) and any(clause_start <= s < m.start() for s, _, _ in mentions):
            ends.append(m.end())
    return sorted(ends)


def _forward_negated(text: str, start: int, triggers: list[int], prev_end: int) -> bool:
    """A cue ends at most five words before ``start``, nothing blocking in between."""
    for t in triggers[bisect.bisect_left(triggers, prev_end): bisect.bisect_right(triggers, start)]:
        gap = text[t:start]
        words = re.findall(r"[a-z']+", gap.lower())
        if len(words) <= 5 and not _CLAUSE_END.search(gap) and not _BREAK_WORDS & set(words):
            return True
    return False


def extract(text: str, lexicon: Lexicon) -> list[str]:
    """Canonical labels of ``lexicon`` explicitly and affirmatively mentioned in ``text``.

    See the module docstring for the rules. Deduplicated, in order of first appearance.
    """
    if not text:
        return []
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    mentions = lexicon.mentions(text)
    if not mentions:
        return []
    triggers = _triggers(text, mentions)

    # group mentions into coordinated lists
    groups: list[list[tuple[int, int, str | None]]] = []
    for m in mentions:
        if groups and _is_list_gap(text[groups[-1][-1][1]:m[0]]):
            groups[-1].append(m)
        else:
            groups.append([m])

    kept: list[str] = []
    prev_end = 0
    for group in groups:
        first_start, last_end = group[0][0], group[-1][1]
        negated = _forward_negated(text, first_start, triggers, prev_end) or bool(
            _POST_NEGATION.match(text, last_end)
        )
        prev_end = last_end
        if negated:
            continue
        for start, end, label in group:
            if label is None or _LIKE_SUFFIX.match(text, end):
                continue
            if label not in kept:
                kept.append(label)
    return kept


GENRE_TREE_TASKS = ("genre-tree", "genre-node")


@JUDGES.register("lexicon")
class LexiconJudge:
    """Factual-protocol judge: the labels of a closed vocabulary mentioned in each response.

    ``vocabulary``: a name in :data:`LEXICONS`, or ``"auto"`` — each row's lexicon from its task:
    ``tasks`` (task → lexicon name, e.g. what the datasets of a run declare:
    :func:`evalcore.protocols.vocab_fit.default_judge`), else the built-in map
    (:func:`evalcore.judges.vocab.lexicon_name`: FMA genre tasks → genres, ``instrument`` → the
    MusicNet instruments, ``composer`` → composers), so one protocol can hold every factual task; a row whose
    task has no vocabulary (none, or unknown) uses ``fallback`` if given, else is an error row.
    ``tree`` (FMA ``genres.csv`` or a JSON {genre: top-level}) widens the genre lexicon to every genre
    of the tree for ``genre-tree`` and ``genre-node`` rows; ``genre-tree`` rows then report each genre
    mentioned as its top-level genre (the "same tree" credit against the FMA top-level label, i.e.
    :func:`evalcore.metrics.factual_modes.apply_mode` ``"top"``), ``genre-node`` rows the genres
    themselves (exact). ``genre`` rows use the 16 top-level genres only.
    """
    path_params = {"tree": "file"}  # must exist (evalcore validate)

    name = "lexicon"
    version = "2"
    uses_tasks = True

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
        self.tree = _vocab.read_genre_tree(tree) if tree else {}
        self._tree_lexicon = (_vocab.restrict(GENRE_LEXICON, list(dict.fromkeys(
            [*_vocab.FMA_GENRES, *self.tree, *self.tree.values()])), name="genre+tree") if self.tree else None)

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
            return LEXICONS[_vocab.lexicon_name(str(task))]
        except ValueError:
            if self.fallback is None:
                raise
            return LEXICONS[self.fallback]

    def labels_for(self, task: str | None) -> list[str]:
        """The canonical labels a row of ``task`` can be credited with (ValueError: unknown task under "auto")."""
        return list(self._lexicon(task).labels)

    def _one(self, text: str, task: str | None) -> dict:
        try:
            lexicon = self._lexicon(task)
        except ValueError as e:
            return {"extracted": None, "error": f"lexicon: {e}"}
        labels = extract(text, lexicon)
        if task == "genre-tree" and lexicon is self._tree_lexicon:
            labels = list(dict.fromkeys(self.tree.get(lab, lab) for lab in labels))
        return {"extracted": labels}

    def judge(self, texts: list[str | None], options: list[list[str] | None],
              tasks: list[str | None] | None = None) -> list[dict]:
        """One ``{"extracted": [...]}`` per text; ``options`` is unused (kept for one signature)."""
        if len(texts) != len(options) or (tasks is not None and len(tasks) != len(texts)):
            raise ValueError(f"{len(texts)} texts but {len(options)} option lists")
        tasks = tasks if tasks is not None else [None] * len(texts)
        return [{"extracted": None, "error": "no response"} if t is None else self._one(t, task)
                for t, task in zip(texts, tasks)]
