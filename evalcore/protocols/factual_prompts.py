"""Factual-QA prompt sets (paper App. B) and the prompt variants of the derived formats.

* :data:`PAPER_PROMPTS` — per task, variant name → template for a protocol config's ``variants``: the
  paper's three phrasings per task plus the "Among {vocabulary}, …" form listing every label, word for
  word as its Tables 4-6, 12 and 14 print them (two genre prompts end without "?"); the configs in
  ``configs/paper/`` use them. :data:`PROMPTS` is evalcore's wording (the same, with the "?"), the set
  :func:`variants` uses by default; :data:`PROMPT_SETS` names both.
  Note: :func:`evalcore.protocols.requests.expand_requests` renders templates without a
  vocabulary, so use :func:`variants` (which writes the vocabulary into the template) for the
  "among" form in a run config.
* :data:`BINARY_VARIANTS` and :data:`TRUE_FALSE_VARIANTS` — the prompt variants of the derived formats, whose
  items carry the whole prompt in their question (the items: :mod:`evalcore.datasets.factual_formats`).
"""

from __future__ import annotations

from typing import Sequence

from evalcore.vocab.labels import family, vocabulary as task_vocabulary

__all__ = ["PROMPTS", "PAPER_PROMPTS", "PROMPT_SETS", "BINARY_VARIANTS", "TRUE_FALSE_VARIANTS", "prompts_for",
           "variants"]

PROMPTS: dict[str, dict[str, str]] = {
    "instrument": {  # Table 5
        "used": "Which instruments are used in this piece of music?",
        "instrumentation": "Which instruments constitute the instrumentation of this piece?",
        "playing": "What instruments are playing in this song?",
        "among": "Among {vocabulary}, which instruments are used in this piece of music?",
    },
    "genre": {  # Tables 6 and 14
        "what-is": "What is the genre of this song?",
        "infer": "What can you infer about the genre of the music?",
        "fall-under": "What genre does this piece of music fall under?",
        "among": "Among {vocabulary}, what is the genre of this song?",
    },
    "composer": {  # Table 12
        "resemble": "Which classical composer's style does this piece resemble the most?",
        "closely": "Which classical composer's compositional style does this piece most closely resemble?",
        "sound-like": "Which classical composer's work does this sound like?",
        "among": "Among {vocabulary}, whose style does this piece of music sound like?",
    },
}

#: the paper's prompts word for word (Table 5: instruments; Tables 6 and 14: genres, where "What is the genre of
#: this song" and "What can you infer about the genre of the music" print no "?"; Table 12: composers; the
#: "Among {*}" forms of Table 4); ``{vocabulary}`` is where the paper prints "{*}" / "{all genres}"
PAPER_PROMPTS: dict[str, dict[str, str]] = {
    "instrument": dict(PROMPTS["instrument"]),
    "genre": {**PROMPTS["genre"], "what-is": "What is the genre of this song",
              "infer": "What can you infer about the genre of the music"},
    "composer": dict(PROMPTS["composer"]),
}
#: the named prompt sets: evalcore's wording and the paper's
PROMPT_SETS: dict[str, dict[str, dict[str, str]]] = {"evalcore": PROMPTS, "paper": PAPER_PROMPTS}

#: the derived items carry the whole prompt in their question
BINARY_VARIANTS = {"binary": "{question}"}
TRUE_FALSE_VARIANTS = {"true-false": "{question}"}


def prompts_for(task: str, prompts: str = "evalcore") -> dict[str, str]:
    """The raw prompt set of ``task`` (templates may contain ``{vocabulary}``) in the named set
    (:data:`PROMPT_SETS`: ``evalcore`` or ``paper``); ``genre-tree``/``genre-node`` share the genre prompts."""
    if prompts not in PROMPT_SETS:
        raise ValueError(f"unknown prompt set {prompts!r}; known: {', '.join(PROMPT_SETS)}")
    return dict(PROMPT_SETS[prompts][family(task)])


def variants(task: str, vocabulary: Sequence[str] | None = None, names: Sequence[str] | None = None,
             prompts: str = "evalcore") -> dict[str, str]:
    """Prompt variants of the named set ready for a protocol config: ``{vocabulary}`` written in as "a, b, c"
    (default: the task's closed vocabulary); ``names`` keeps a subset, in that order."""
    vocab = list(vocabulary) if vocabulary is not None else task_vocabulary(task)
    listed = ", ".join(vocab).replace("{", "{{").replace("}", "}}")
    raw = prompts_for(task, prompts)
    unknown = [n for n in (names or ()) if n not in raw]
    if unknown:
        raise ValueError(f"unknown prompt variant(s) {unknown}; known: {sorted(raw)}")
    return {n: raw[n].replace("{vocabulary}", listed) for n in (names or raw)}
