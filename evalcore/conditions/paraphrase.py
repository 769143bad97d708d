"""``paraphrase_<j>``: the item's own clip, its question and every option in their ``j``-th paraphrase.

The paraphrases come from the run's ``paraphraser`` (an LLM through the LLM layer, seeded per item and paraphrase,
its answers cached; :mod:`evalcore.pipeline.paraphrases`), made once on the driver before the requests and kept in
``paraphrases/`` under the run root. The options keep their order, so the correct option is the same one and the
option orders shuffle the paraphrased texts exactly as they shuffle the written ones; the item's ``metadata`` gains
``paraphrase_of`` (each paraphrased option → the written one) so a chosen paraphrase maps back to the option it
rewords (consistency across paraphrases; MuChoMusic's ``options_by_type`` follows the paraphrase). The paired
difference correct − paraphrase_j says whether the wording
moves the score; an item the paraphraser gave no paraphrase for is an error row of that request.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evalcore.conditions.base import CONDITIONS, Context, Family
from evalcore.core.errors import INPUT

_INDEX = re.compile(r"^[1-9][0-9]?$")


@CONDITIONS.register("paraphrase")
class Paraphrase(Family):
    """The j-th paraphrase (``value``) of the question and options, with the item's own clip."""

    parameter_form = "<j>"
    parameter_rule = "the paraphrase is numbered from 1 to 99, e.g. paraphrase_1"

    @classmethod
    def read(cls, parameter: str) -> int | None:
        return int(parameter) if _INDEX.match(parameter) else None

    @property
    def paraphrase(self) -> int:  # type: ignore[override]
        return int(self.value)

    def kept(self) -> float | None:
        return None  # the whole clip, other words: not a point of the listening curve

    def asked(self, item: dict[str, Any], ctx: Context) -> dict[str, Any]:
        got = (ctx.paraphrases or ())[self.paraphrase - 1] if len(ctx.paraphrases or ()) >= self.paraphrase else None
        if not got or "question" not in got:
            why = (got or {}).get("error") or "the run made no paraphrase of it (the run config's paraphraser)"
            return {**item, "_error": (f"paraphrase {self.paraphrase}: {why}"[:300],
                                       (got or {}).get("error_class") or INPUT)}
        meta = json.loads(item["metadata"]) if isinstance(item.get("metadata"), str) and item["metadata"] else {}
        reworded = dict(zip(got["options"], item.get("options") or []))  # paraphrased text → the written one
        meta["paraphrase_of"] = reworded
        if isinstance(meta.get("options_by_type"), dict):  # MuChoMusic's option types, as this paraphrase words them
            back = {v: k for k, v in reworded.items()}
            meta["options_by_type"] = {t: back.get(v, v) for t, v in meta["options_by_type"].items()}
        return {**item, "question": got["question"], "options": list(got["options"]),
                "metadata": json.dumps(meta, sort_keys=True)}
