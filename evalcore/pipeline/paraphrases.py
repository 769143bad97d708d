"""The paraphrase conditions' paraphrases: each multiple-choice question and its options reworded by the run's
``paraphraser``, once per item and paraphrase, on the driver before any request is formed.

For every item a protocol with ``paraphrase_<j>`` conditions asks, the paraphraser (an LLM through the LLM layer:
:class:`~evalcore.llm.runner.LLMRunner`, its responses cached — by default under the run's root, or in a shared
``cache_root`` — and logged) is asked for paraphrase 1 … k, k the largest j: one request each, whose text names the
paraphrase's number (so each j is its own draw, and the endpoint's ``seed`` makes it reproducible), answered as JSON
``{"question": …, "options": [...]}`` with as many options as the item's, in their order. An answer that is not
that (wrong count, empty text, no JSON) or a failed request is that paraphrase's error: its requests become error
rows, never dropped. The paraphrases are written to ``paraphrases/part-00000.parquet`` under the run root (read
back by a resumed run, and by the item browser, which shows them beside the question).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel

from evalcore.conditions.base import condition
from evalcore.core import storage
from evalcore.core.errors import OUTPUT, bounded
from evalcore.llm.runner import LLMRunner
from evalcore.protocols.requests import reads
from evalcore.runconfig.config import RunConfig

log = logging.getLogger("evalcore")

TEMPLATE_VERSION = "evalcore-paraphrase@1"  # bump when the prompt changes (part of the cache key)
PROMPT = ("Paraphrase this multiple-choice question and each of its options: keep every meaning and the options' "
          "order, change the wording. This is paraphrase number {j}.\n\nQuestion: {question}\nOptions:\n{options}\n\n"
          'Answer with JSON only: {{"question": "...", "options": [...]}}, with exactly {n} options.')
PATH = ("paraphrases", "part-00000.parquet")
COLUMNS = ["dataset", "item_id", "paraphrase", "question", "options", "error", "error_class"]


class Paraphrased(BaseModel):
    """The paraphraser's answer."""

    question: str
    options: list[str]


def wanted(cfg: RunConfig) -> int:
    """The most paraphrases a protocol of the run asks (0: none)."""
    return max((condition(c).paraphrase or 0 for p in cfg.protocols for c in p.conditions), default=0)


def _asked(cfg: RunConfig, items: Iterable[dict]) -> list[dict]:
    """The items a protocol with paraphrase conditions asks (in item order, each once)."""
    protos = [p for p in cfg.protocols if any(condition(c).paraphrase for c in p.conditions)]
    return [it for it in items if it.get("options") is not None and any(reads(p, it) for p in protos)]


def messages(item: dict, j: int) -> list[dict]:
    """The paraphraser's request for paraphrase ``j`` of ``item``."""
    opts = "\n".join(f"{k + 1}. {o}" for k, o in enumerate(item["options"]))
    return [{"role": "user", "content": PROMPT.format(j=j, question=item["question"], options=opts,
                                                     n=len(item["options"]))}]


def _row(item: dict, j: int, completion: Any) -> dict[str, Any]:
    row = {"dataset": item["dataset"], "item_id": item["item_id"], "paraphrase": j, "question": None,
           "options": None, "error": None, "error_class": None}
    data = getattr(completion, "data", None)
    if completion.error is not None or data is None:
        return {**row, "error": bounded(f"paraphraser: {completion.error or 'no answer'}"),
                "error_class": completion.error_class or OUTPUT}
    data = data if isinstance(data, dict) else data.model_dump()  # validated against Paraphrased
    opts, question = [str(o).strip() for o in data["options"]], str(data["question"]).strip()
    if len(opts) != len(item["options"]) or not all(opts) or len(set(opts)) != len(opts) or not question:
        return {**row, "error": f"paraphraser: gave {len(opts)} options for {len(item['options'])}, an empty one or "
                                "two alike", "error_class": OUTPUT}
    return {**row, "question": question, "options": opts}


def made(rows: pd.DataFrame) -> dict[tuple[str, str], tuple[dict, ...]]:
    """The expansion's view of a paraphrase table: (dataset, item id) → paraphrase 1, 2, … as dicts."""
    out: dict[tuple[str, str], list[dict]] = {}
    for r in rows.sort_values(["dataset", "item_id", "paraphrase"]).itertuples():
        got = ({"question": r.question, "options": list(r.options)} if r.error is None or r.error != r.error
               else {"error": r.error, "error_class": r.error_class})
        out.setdefault((r.dataset, r.item_id), []).append(got)
    return {k: tuple(v) for k, v in out.items()}


def paraphrases(cfg: RunConfig, items: Iterable[dict], out: storage.RunStorage
                ) -> dict[tuple[str, str], tuple[dict, ...]]:
    """The run's paraphrases: read back from the run root when an earlier attempt wrote them, else made and
    written (none when no protocol asks for them)."""
    k = wanted(cfg)
    if not k or cfg.paraphraser is None:
        return {}
    path = storage.join(cfg.root, *PATH)
    if storage.exists(path):
        return made(storage.read_parquet(path).to_pandas())
    asked = _asked(cfg, items)
    params = {"cache_root": cfg.root, "log_root": cfg.root, "log_name": "paraphraser", **cfg.paraphraser.params}
    runner = LLMRunner(**params)
    todo = [(it, j) for it in asked for j in range(1, k + 1)]
    completions = runner.run([messages(it, j) for it, j in todo], TEMPLATE_VERSION, schema=Paraphrased)
    rows = pd.DataFrame([_row(it, j, c) for (it, j), c in zip(todo, completions)], columns=COLUMNS)
    failed = int(rows["error"].notna().sum())
    log.info("paraphrases: %d items × %d paraphrases, %d failed (their requests are error rows)", len(asked), k,
             failed)
    out.write_parquet(pa.Table.from_pandas(rows, preserve_index=False), path)
    return made(rows)
