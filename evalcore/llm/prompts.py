"""Versioned prompt templates for the LLM judge tasks and parsers for their answers.

A template's ``tag`` ("name@version") is part of the response-cache key: bump ``version``
whenever the wording changes, so old cached answers are never reused for a new prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Sequence

from pydantic import BaseModel, ConfigDict


@dataclass(frozen=True)
class PromptTemplate:
    """A system prompt and a ``str.format`` user template."""

    name: str
    version: str
    system: str
    user: str

    @property
    def tag(self) -> str:
        return f"{self.name}@{self.version}"

    def render(self, **fields: str) -> list[dict[str, str]]:
        """Chat messages for ``fields`` (every placeholder must be given)."""
        return [{"role": "system", "content": self.system},
                {"role": "user", "content": self.user.format(**fields)}]


# evalcore's extraction rules: the eight rules of Appendix B.1 of "Factual and musical metrics for Music LMs"
# reworded, in the paper's order (exact mention, no guessing, comparatives, deduplication and order, output format,
# empty case, canonical form, no stylistic inclusion), with examples of evalcore's. The paper's own words are
# PAPER_EXTRACTION_RULES below.
EXTRACTION_RULES = (
    "1. Explicit mentions only: return a term only if the text itself states it.",
    "2. Do not guess: never infer a label from context or association "
    '(for example, do not return "jazz" because the text mentions a "swing rhythm").',
    "3. Comparatives: when the text prefers one entity over another "
    '("X more than Y", "X rather than Y"), return only the preferred one, X.',
    "4. Remove duplicates and keep the order in which each label first appears.",
    '5. Output format: a single comma-separated list of labels, e.g. "rock, jazz, classical", '
    "and nothing else.",
    "6. If no label of the vocabulary is mentioned, output an empty string.",
    "7. Canonical forms: normalise every mention to the simple canonical label of the vocabulary "
    '(for example "J.S. Bach" -> "Bach", "Acoustic Grand Piano" -> "piano").',
    "8. Nothing stylistic: descriptions of mood, feel or style that do not name a label are ignored "
    '(for example "a jazz-like feeling" gives nothing).',
)

LABEL_EXTRACTION = PromptTemplate(
    name="label_extraction",
    version="1",
    system=(
        "You extract labels from a music model's answer for an automatic evaluation. "
        "You follow these rules strictly:\n" + "\n".join(EXTRACTION_RULES) + "\n"
        "Only labels from the given vocabulary may be returned."
    ),
    user=(
        "Category: {category}\n"
        "Vocabulary (canonical labels): {vocabulary}\n\n"
        "Text:\n\"\"\"\n{text}\n\"\"\"\n\n"
        "Labels (comma-separated, or empty):"
    ),
)

# Appendix B.1 of "Factual and musical metrics for Music LMs" word for word: its opening sentence and its eight
# rules, each as the paper's text prints it (bold run-in heads as Markdown ``**…**``, as extracted). Rules 6-8 are
# printed after a page break, below Table 5; the text extraction writes rule 7's arrows as LaTeX ``\rightarrow``,
# the printed glyph is "→".
PAPER_EXTRACTION_INTRO = ("We define the following rules for factual keyword extraction, which are consistently "
                          "applied across all tasks and categories:")
PAPER_EXTRACTION_RULES = (
    "1. **Exact mention requirement:** Only terms that explicitly appear in the model's output are returned.",
    '2. **No guessing:** Implicit inference or contextual associations (e.g., "jazz" inferred from "swing rhythm") '
    "are excluded.",
    '3. **Comparatives:** For comparative statements ("X more than Y"), only the preferred entity (X) is retained.',
    "4. **Deduplication and ordering:** Duplicate mentions are removed, while the order of first appearance is "
    "preserved.",
    "5. **Output format:** Results are returned as a comma-separated list, e.g., rock, jazz, classical.",
    "6. **Empty case:** If no relevant term is mentioned, the output is an empty string.",
    '7. **Canonical form:** All terms are normalized to simplified canonical forms (e.g., "J.S. Bach" → "Bach", '
    '"Acoustic Grand Piano" → "piano").',
    '8. **No stylistic inclusion:** Descriptions of mood or affect without explicit mention (e.g., "a jazz-like '
    'feeling") are ignored.',
)

#: the paper's extraction prompt: the system message is App. B.1 word for word, all eight rules (nothing added); the
#: paper prints no user message, so it is evalcore's (:data:`LABEL_EXTRACTION`'s): the category, the vocabulary and
#: the text. Version 1 sent rules 1-5 only.
LABEL_EXTRACTION_PAPER = PromptTemplate(
    name="label_extraction_paper",
    version="2",
    system=PAPER_EXTRACTION_INTRO + "\n" + "\n".join(PAPER_EXTRACTION_RULES),
    user=LABEL_EXTRACTION.user,
)

MCQ_MATCH = PromptTemplate(
    name="mcq_match",
    version="1",
    system=(
        "You decide which option of a multiple-choice question a free-form answer chose. "
        "Reply with exactly one letter, A, B, C or D, or with the word none if the answer "
        "picks no option, picks several, or is not a clear choice. Do not judge whether the "
        "choice is correct and do not explain."
    ),
    user=(
        "Question: {question}\n"
        "A. {a}\nB. {b}\nC. {c}\nD. {d}\n\n"
        "Answer to classify:\n\"\"\"\n{response}\n\"\"\"\n\n"
        "Chosen option (A, B, C, D or none):"
    ),
)

MCQ_MATCH_JSON = PromptTemplate(
    name="mcq_match_json",
    version="1",
    system=(
        "You decide which option of a multiple-choice question a free-form answer chose. "
        'Reply with a JSON object of the form {"choice": "A"} and nothing else: the value is '
        'one letter, "A", "B", "C" or "D", or "none" if the answer picks no option, picks '
        "several, or is not a clear choice. Do not judge whether the choice is correct."
    ),
    user=MCQ_MATCH.user.replace("Chosen option (A, B, C, D or none):", "JSON:"),
)


class McqChoice(BaseModel):
    """The structured answer of :data:`MCQ_MATCH_JSON`."""

    model_config = ConfigDict(extra="forbid")
    choice: Literal["A", "B", "C", "D", "none"]


PARAPHRASE = PromptTemplate(
    name="paraphrase",
    version="1",
    system=(
        "You rewrite descriptions of music. Paraphrase the text so that it keeps exactly the "
        "same meaning and every musical fact (genres, instruments, mood, tempo, structure), "
        "while changing the wording and sentence structure; synonyms are welcome. Add nothing, "
        "drop nothing. Reply with the paraphrase only."
    ),
    user="Text:\n\"\"\"\n{text}\n\"\"\"\n\nParaphrase:",
)

ADVERSARIAL = PromptTemplate(
    name="adversarial",
    version="1",
    system=(
        "You rewrite descriptions of music. Change the meaning of the text with as few edits "
        "as possible: keep its sentence structure and most of its words, but replace the "
        "musically relevant facts (genres, instruments, mood, tempo, structure) so that the "
        "result is fluent yet factually different from, and incompatible with, the original. "
        "Reply with the rewritten text only."
    ),
    user="Text:\n\"\"\"\n{text}\n\"\"\"\n\nRewrite:",
)

TEMPLATES: dict[str, PromptTemplate] = {t.name: t for t in (LABEL_EXTRACTION, LABEL_EXTRACTION_PAPER, MCQ_MATCH,
                                                             MCQ_MATCH_JSON, PARAPHRASE, ADVERSARIAL)}


def parse_labels(output: str, vocabulary: Sequence[str]) -> list[str]:
    """Labels of a comma-separated extractor answer that are in ``vocabulary``; deduped, in order."""
    canon = {v.lower(): v for v in vocabulary}
    out: list[str] = []
    for part in re.split(r"[,\n;]", output or ""):
        label = canon.get(part.strip().strip(".\"'").lower())
        if label is not None and label not in out:
            out.append(label)
    return out


_MATCHER_LETTER = re.compile(r"\W*(?:(?i:option|choice|letter)\s*:?\s*([ABCDabcd])|([ABCDbcd])|[(\[]([abcd])[)\]])\W*")


def parse_letter(output: str) -> str | None:
    """"A".."D" from a matcher answer, None for "none" or anything unclear.

    A lowercase "a" alone is the English article (an answer cut after its first word), never option A:
    it counts only enclosed ("(a)") or after "option"/"choice"/"letter"."""
    m = _MATCHER_LETTER.fullmatch((output or "").strip())
    return next(g for g in m.groups() if g).upper() if m else None
