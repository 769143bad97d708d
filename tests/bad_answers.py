"""A seeded generator of hostile model answers, per CMI-Bench rule family and per judge (docs/bad_inputs.md, "Bad
answers"): what a model that loops, babbles, echoes code or emits garbage may answer — deep nesting, operator
chains, huge or non-finite numbers, every kind of Unicode (lone surrogates, controls, RTL marks), the released
prefix patterns over and over, duplicate timestamps, unterminated literals — each family's own tokens mixed with
generic ones. Used by tests/test_bad_answers.py (a thousand a family) and benchmarks/hostile_answers.py (a hundred
thousand a family and the longest answers each family allows).

Every answer is built from ``random.Random(seed)`` alone: the same seed, the same corpus.
"""

from __future__ import annotations

import random
from typing import Iterator

#: tokens any answer may hold
GENERIC = ("", " ", "\n", "\t", "\r\n", "\x00", "\x1b[31m", "\u202e", "\u200b", "\ufeff", "\ud800", "\udfff", "é",
           "🎸", "♯", "♭", "²", "٣", "１", "nan", "NaN", "inf", "-inf", "1e308", "1e999", "-0", "0", "9" * 30,
           "1" * 400, "1" * 5000, "(", ")", "[", "]", "{", "}", "'", '"', "\\", ",", ":", ";", ".", "-", "+", "*",
           "**", "~", "not ", "lambda:", "__import__('os')", "None", "True", "x", "<s>", "</s>", "%s", "{0}")
#: each rule family's (or judge's) own tokens
FAMILY = {
    "cmi_lyrics": (" lyrics ", " are", ":", " content ", " is", " transcription ", " text ", "The lyrics of the song "
                   "are: ", "la ", "i'm ", "3 ", "21 ", "1" * 27 + " ", "1" * 28 + " ", "²", "-", "'", "!!!"),
    "cmi_beat": ("0.5", "1.0s", "12:30", "1:", ":5", "99999999:1", "1.2.3", "0.5 and 1.0", "-1", "1e308", "1e-320",
                 ",", ", ", "s", "beats", "1,1,1,1,", "0," * 50, "nan,", "inf,"),
    "cmi_melody": ("[", "]", "(", ")", "('0.5', 60)", "('10.0058', 0), ", "('1e308', 60), ", "('nan', 60), ",
                   "('-inf', 'C4'), ", "('0:01', 'C#-9'), ", "(0, 60)", "(0.5, 1e400)", "('0.5', 10**400)",
                   "{'time': '0.5', 'MIDI_number': 60}", "\"'0.5'\"", "('0.5',", "'", "1+", "-", "[(" * 3, "C♯4",
                   "('0.5', ('a',)), ", "('0.5', 'G#999'), ", "('99999999999', 60), "),
    "cmi_technique": ("[", "(", ")", "]", "('0.5', '1.5', 'Vibrato')", "('nan', 'inf', 'Plucks')",
                      "{'start': 1e308, 'end': -1e308, 'technique': 'Tremolo'}", "('1', '2', 'No Tech')",
                      "('9e99', '1', 'Glissando')", '["[', "('0', '10', 'Unknown')", "(1, 2, 3)", "-" * 50),
    "cmi_key": ("C", "c#", "e#", "♯", "m", "major", "minor", "Ab minor", " ", "1", "the key is ", "b#m", "Cb"),
    "cmi_multiclass": ("blues", "hip-hop", "hiphop", "rock", "pop", "9", "49", "C#", "_", "-", " ", "jazz"),
    "cmi_regression": ("5", "5.5", "out of 9", "1-9 scale", "from 1 to 9", "7-point scale", "4/4 time signature",
                       "Example 3", "10", "0", "120 BPM", "9" * 5000, "3.", ".3"),
    "cmi_tagging": ("rock", "poprock", "electric guitar", "electricguitar", "mood", ", ", "drums", "a" * 100,
                    "word%d", "  "),
    "mcq": ("A", "B", "(A)", "A)", "answer: ", "Option ", "1", "2", "the answer is ", "none", "all", "both A and B",
            "first", "choice", "A" * 100),
    "factual": ("guitar", "piano", "drums", "vocals", "yes", "no", "true", "false", "not ", ", ", " and ", "none"),
    "freeform": ("a ", "the ", "music ", "guitar ", "song ", ". ", "\n", "la " * 20, "word%d "),
}


def _token(rng: random.Random, family: str) -> str:
    pool = FAMILY[family] if rng.random() < 0.7 else GENERIC
    tok = rng.choice(pool)
    if "%d" in tok:
        tok = tok.replace("%d", str(rng.randrange(10**6)))
    return tok


def answer(rng: random.Random, family: str, max_chars: int) -> str:
    """One hostile answer of ``family``, at most ``max_chars`` characters (a few near it)."""
    shape = rng.random()
    if shape < 0.1:  # one token repeated: a loop (nesting, operator chains, duplicate timestamps)
        tok = _token(rng, family) or "-"
        n = rng.randint(1, max(1, max_chars // max(1, len(tok))))
        return (tok * n)[:max_chars]
    if shape < 0.15:  # nesting or an operator chain, then a literal
        head = rng.choice(("-", "+", "~", "not ", "[", "(", "{", "1+", "x.", "x(", "[0]", "lambda:"))
        return (head * rng.randint(1, max(1, max_chars // len(head))))[:max_chars - 1] + "1"
    parts: list[str] = []
    size = 0
    limit = int(max_chars * rng.random() ** 3) + 1  # mostly short, some long
    while size < limit:
        tok = _token(rng, family)
        if rng.random() < 0.05:
            tok *= rng.randint(2, 50)
        parts.append(tok)
        size += len(tok) + 1
    return "".join(parts)[:max_chars]


def corpus(family: str, n: int, seed: int = 0, max_chars: int = 400) -> Iterator[str]:
    """``n`` hostile answers of ``family`` from ``seed``."""
    rng = random.Random(f"{family}:{seed}")
    for _ in range(n):
        yield answer(rng, family, max_chars)


#: the answers of docs/bad_inputs.md's "Bad answers" section, each family's named cases
NAMED = {
    "cmi_lyrics": ["1" * 400, "a lyrics are" * 1000, ("the lyrics " * 4000)[:40_000], "1" * 5000, "\ud800"],
    "cmi_beat": [",".join(["1"] * 1_000_000), ",".join(f"{i * 0.01:.2f}" for i in range(100_000)), "1e308,nan,inf"],
    "cmi_melody": ["-" * 3000 + "1", "1+" * 3000 + "1", "[" * 3000, "~" * 100_000 + "1",
                   str([(f"{i * 0.0058:.4f}", 60) for i in range(20_000)]), "[('0', 60), ('1e12', 60)]"],
    "cmi_technique": ["[" + "-" * 3000 + "1)", "[('0', '1e308', 'Vibrato')]", "[(" * 5000 + ")"],
    "cmi_key": ["c#" * 100_000, ""],
    "cmi_multiclass": ["hiphop" * 100_000],
    "cmi_regression": ["9" * 100_000, "5." * 50_000],
    "cmi_tagging": [" ".join(f"w{i}" for i in range(100_000))],
}
