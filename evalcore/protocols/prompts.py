"""Prompt templates and seeded option orders."""

from __future__ import annotations

import string
from typing import Sequence

from evalcore.protocols.seeding import rng

#: default prompt variants per protocol (config ``variants`` replaces them)
DEFAULT_VARIANTS: dict[str, dict[str, str]] = {
    "freeform": {"default": "{question}"},
    "factual": {"default": "{question}"},
    # the MuChoMusic prompt form
    "mcq": {"default": "Question: {question}\nOptions:\n{options}\nThe correct answer is:"},
}

LETTERS = string.ascii_uppercase


def option_order(n_options: int, item_id: str, order: int, seed: int) -> list[int]:
    """The presented order (indices into the canonical options) of shuffle ``order`` of an item.

    Depends only on (seed, item, order), so every model and condition sees the same orders.
    """
    return [int(i) for i in rng("options", seed, item_id, order).permutation(n_options)]


def render(template: str, question: str, options: Sequence[str] | None, vocabulary: Sequence[str] = ()) -> str:
    """Fill a prompt template; ``{options}`` becomes "(A) ...\\n(B) ..." lines."""
    opts = list(options or [])
    return template.format(
        question=question or "",
        options="\n".join(f"({LETTERS[i]}) {o}" for i, o in enumerate(opts)),
        letters=", ".join(LETTERS[: len(opts)]),
        vocabulary=", ".join(vocabulary),
    )
