"""``text_only``: no audio at all (the request carries none; nothing is decoded)."""

from __future__ import annotations

from typing import Any

from evalcore.conditions.base import CONDITIONS, Condition, Context


@CONDITIONS.register("text_only")
class TextOnly(Condition):
    """The question without audio."""

    hears = False
    control = True

    def kept(self) -> float | None:
        return 0.0

    def expand(self, request: dict[str, Any], ctx: Context) -> dict[str, Any]:
        request.update(audio_uri=None, audio_item_id=None, excerpt_start=None, excerpt_end=None)
        return request
