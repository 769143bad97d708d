"""Prompt templates and seeded option orders.

A protocol's prompt is either a plain template (a config ``variants`` entry, placeholders
``{question} {options} {letters} {vocabulary}``) or a named :class:`~evalcore.protocols.templates.TemplateSet`
(benchmark / model-family templates). Both can be preceded by in-context examples: a plain
template renders each example with itself followed by " (B) <option text>".
"""

from __future__ import annotations

import string
from typing import Sequence, Union

from evalcore.core.seeding import rng
from evalcore.protocols.templates import TemplateSet

LETTERS = string.ascii_uppercase
#: how a plain template's in-context example shows its answer, and what separates examples
EXAMPLE_ANSWER = " ({letter}) {text}"
EXAMPLE_SEP = "\n\n"

Template = Union[str, TemplateSet]
ExampleTuple = tuple[str, Sequence[str], int]  # question, presented options, correct index


def option_order(n_options: int, item_id: str, order: int, seed: int) -> list[int]:
    """The presented order (indices into the canonical options) of shuffle ``order`` of an item.

    Depends only on (seed, item, order), so every model and condition sees the same orders.
    """
    return [int(i) for i in rng("options", seed, item_id, order).permutation(n_options)]


def _fill(template: str, question: str, options: Sequence[str] | None, vocabulary: Sequence[str]) -> str:
    opts = list(options or [])
    return template.format(
        question=question or "",
        options="\n".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(opts)),
        letters=", ".join(LETTERS[: len(opts)]),
        vocabulary=", ".join(vocabulary),
    )


def render(template: Template, question: str, options: Sequence[str] | None, vocabulary: Sequence[str] = (),
           examples: Sequence[ExampleTuple] = ()) -> str:
    """Fill a prompt template; ``{options}`` becomes "(A) ...\\n(B) ..." lines (a template set
    formats options its own way). ``examples`` (in-context) come first, each with its answer."""
    if isinstance(template, TemplateSet):
        return template.render(question, list(options or []), examples)
    shots = [_fill(template, q, o, vocabulary) + EXAMPLE_ANSWER.format(letter=LETTERS[c], text=o[c])
             for q, o, c in examples]
    return EXAMPLE_SEP.join([*shots, _fill(template, question, options, vocabulary)])
