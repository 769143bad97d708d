"""``correct``: the item's own clip (its excerpt), the condition every other is compared to."""

from __future__ import annotations

from evalcore.conditions.base import CONDITIONS, Condition


@CONDITIONS.register("correct")
class Correct(Condition):
    """The item's own audio."""
