"""``random``: another recording of the same dataset, by a seeded derangement of its distinct audio files (never a
file with itself); the partner's own excerpt is played."""

from __future__ import annotations

from typing import Any

from evalcore.conditions.base import CONDITIONS, Condition, Context
from evalcore.core.errors import INPUT


@CONDITIONS.register("random")
class RandomAudio(Condition):
    """A different recording of the same dataset."""

    control = True

    def kept(self) -> float | None:
        return None  # another clip: not a share of this one

    def expand(self, request: dict[str, Any], ctx: Context) -> dict[str, Any]:
        partner = ctx.partner
        if partner is None:
            request.update(error=f"random audio: {ctx.unpairable or 'no partner'}", error_stage="expand",
                           error_class=INPUT)
        else:
            request.update(audio_uri=partner["audio_uri"], audio_item_id=partner["item_id"],
                           excerpt_start=partner.get("excerpt_start"), excerpt_end=partner.get("excerpt_end"))
        return request
