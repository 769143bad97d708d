"""``caption``: the clip replaced by a text description of it, put in the prompt where the audio was.

The description is the item's ``caption`` field (e.g. a MusicCaps caption), else the answer a model gave for the
same clip in an earlier run (``captions:`` in the run config: a free-form run asking it to describe the music). The
model is given no audio: the same model answers from the description alone, and a text LLM (``text_llm``) given the
description is the cascade baseline. The paired difference correct − caption says whether listening beats reading a
description of the clip. A request whose clip has no description is an error row of the expansion (class input).
"""

from __future__ import annotations

from typing import Any

from evalcore.conditions.base import CONDITIONS, Condition, Context
from evalcore.core.errors import INPUT

#: how the description takes the audio's place in the prompt (part of each request's prompt, so of its id's inputs)
TEMPLATE = "Description of the music (in place of the audio): {caption}\n\n{prompt}"


@CONDITIONS.register("caption")
class Caption(Condition):
    """A description of the clip instead of the clip."""

    hears = False
    described = True

    def kept(self) -> float | None:
        return None  # a description, not a share of the clip

    def expand(self, request: dict[str, Any], ctx: Context) -> dict[str, Any]:
        request.update(audio_uri=None, audio_item_id=None, excerpt_start=None, excerpt_end=None)
        if not ctx.caption:
            request.update(error="caption condition: the clip has no description (an item `caption` field, or "
                                 "the run config's `captions` run)", error_stage="expand", error_class=INPUT)
        else:
            request["prompt"] = TEMPLATE.format(caption=ctx.caption, prompt=request["prompt"])
        return request
