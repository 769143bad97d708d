"""Arrow schemas of every table evalcore reads or writes, in one place.

The flow is item → request → (decoded chunk) → response → judgment → score row.
Each later table carries the request key columns so tables join on ``request_id``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

#: the summary metric counting a cell's errored requests (tables/errors.parquet lists them)
ERRORED = "errored"
ERRORED_DEFINITION = ("requests of this cell that errored (any stage; listed in tables/errors.parquet); every other "
                      "metric of the cell leaves them out unless its name ends in _with_errors")
#: a figure computed by evalcore's strict reading of a published rule is named after the figure it stands beside:
#: ``accuracy`` → ``accuracy_strict`` (:func:`strict_name`); the per-item column ``correct`` → ``correct_strict``
STRICT = "_strict"
#: the summary metric counting a cell's items whose published verdict and strict verdict differ (in any option
#: order); its definition ends with :data:`QUIRKS` and the quirks of the rule that credits them
VERDICTS_DIFFER = "verdicts_differ"
QUIRKS = "; credited by "


@dataclass(frozen=True)
class PublishedRule:
    """The released scorer a judge follows, and where evalcore's strict reading of it departs.

    ``source``: the scorer, where it was read (repository, file, function, commit); ``quirks``: a few words naming
    what the released scorer credits that the strict reading does not (the report says "17 of 136 items credited
    by <quirks>"); ``strict``: what the strict reading counts instead ("" when it departs nowhere: both figures
    are then equal on every response). A judge names its rule (:attr:`evalcore.judges.base.JudgeBase.rule`); the
    MCQ scorer names it in its figures' definitions (:mod:`evalcore.scorers.mcq_verdicts`)."""

    source: str
    quirks: str
    strict: str = ""


CONDITIONS = ("correct", "random", "silence", "noise", "text_only")

ITEM = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("protocol", pa.string(), nullable=False),  # a protocol kind (evalcore.kinds)
        pa.field("task", pa.string()),  # e.g. "instrument", "tempo", "caption"
        pa.field("audio_uri", pa.string()),  # local path or s3://bucket/key
        pa.field("excerpt_start", pa.float64()),  # seconds, null = from 0
        pa.field("excerpt_end", pa.float64()),  # seconds, null = to the end
        pa.field("question", pa.string()),
        pa.field("reference", pa.string()),  # reference answer (free-form)
        pa.field("labels", pa.list_(pa.string())),  # ground-truth labels (factual)
        pa.field("options", pa.list_(pa.string())),  # canonical option order (mcq)
        pa.field("correct_option", pa.int32()),  # 0-based index into options
        pa.field("category", pa.string()),
        pa.field("difficulty", pa.string()),
        pa.field("metadata", pa.string()),  # JSON object, free-form extras
        pa.field("caption", pa.string()),  # a text description of the clip: what the caption condition gives
    ]
)

#: excerpt times (``excerpt_start``/``excerpt_end``) lie within 0..MAX_EXCERPT_SECONDS (about 11.6 days)
MAX_EXCERPT_SECONDS = 1e6

# Key columns identifying one request; a request is item × protocol instance × model × condition ×
# prompt variant × option order, and the decode stage splits it into chunks.
REQUEST_KEY = ["dataset", "item_id", "protocol", "model", "condition", "variant", "option_order"]

REQUEST = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        # "protocol" is the protocol instance's name (config protocols[].name), "protocol_kind" its kind (one of
        # evalcore.kinds: how it is judged and scored); null in shards of runs from before instances = the name
        *[ITEM.field(n) for n in ("dataset", "item_id", "protocol")],
        pa.field("protocol_kind", pa.string()),
        ITEM.field("task"),
        pa.field("model", pa.string(), nullable=False),
        pa.field("condition", pa.string(), nullable=False),
        pa.field("variant", pa.string(), nullable=False),
        pa.field("option_order", pa.int32(), nullable=False),
        pa.field("prompt", pa.string()),
        pa.field("question", pa.string()),  # the item's question, for judges that read it (the LLM matcher)
        pa.field("audio_uri", pa.string()),  # the audio actually played (condition applied)
        pa.field("audio_item_id", pa.string()),  # whose audio it is (random condition)
        # the item's own clip, whatever the condition plays: the id of the first item of its dataset with the
        # same audio file (questions sharing a track share it; null: no audio); the bootstrap resamples clips
        pa.field("clip_id", pa.string()),
        pa.field("excerpt_start", pa.float64()),
        pa.field("excerpt_end", pa.float64()),
        pa.field("seed", pa.int64()),  # per-request seed (noise)
        pa.field("reference", pa.string()),
        pa.field("labels", pa.list_(pa.string())),
        pa.field("options", pa.list_(pa.string())),  # presented order
        pa.field("correct_index", pa.int32()),  # in presented order
        pa.field("category", pa.string()),
        pa.field("difficulty", pa.string()),
        pa.field("metadata", pa.string()),  # the item's JSON metadata (breakdowns: genre, dimensions, option types)
        pa.field("error", pa.string()),
        pa.field("error_stage", pa.string()),
        pa.field("error_class", pa.string()),  # evalcore.core.errors.CLASSES: transient / input / model / judge
    ]
)

RESPONSE = pa.schema(
    [
        *REQUEST,
        pa.field("chunk_index", pa.int32()),
        pa.field("n_chunks", pa.int32()),
        pa.field("audio_seconds", pa.float64()),  # length of the chunk the model heard
        pa.field("text", pa.string()),
        pa.field("model_info", pa.string()),  # JSON: backend, checkpoint, generation settings
        pa.field("decode_s", pa.float64()),
        pa.field("generate_s", pa.float64()),
    ]
)

JUDGMENT = pa.schema(
    [
        pa.field("request_id", pa.string(), nullable=False),
        pa.field("chunk_index", pa.int32()),
        pa.field("judge", pa.string()),  # name@version
        pa.field("extracted", pa.list_(pa.string())),  # factual: labels found in the text
        pa.field("dropped", pa.int32()),  # factual: labels a judge proposed outside the vocabulary (not scored)
        pa.field("parsed_index", pa.int32()),  # mcq: -1 = unanswered (a published rule's judge: the strict reading)
        # mcq, a judge following a published rule: the options its released scorer credits (right when the answer is
        # one of them); null for a judge of evalcore's own rule (parsed_index is its only verdict)
        pa.field("credited", pa.list_(pa.int32())),
        pa.field("embedding_key", pa.string()),  # freeform: key of a cached embedding
        pa.field("scores", pa.string()),  # freeform: per-pair metric values from the pipeline (textmetrics.stream_values)
        pa.field("error", pa.string()),
        pa.field("error_stage", pa.string()),
        pa.field("error_class", pa.string()),
    ]
)

# One row per scored request; metric columns are added by the protocols' scorers.
SCORE_KEY = ["request_id", *REQUEST_KEY, "protocol_kind", "task", "category", "difficulty", "audio_item_id",
             "clip_id"]

SUMMARY = pa.schema(
    [
        pa.field("protocol", pa.string()),  # the protocol instance's name
        pa.field("protocol_kind", pa.string()),  # its kind (evalcore.kinds)
        pa.field("dataset", pa.string()),
        pa.field("model", pa.string()),
        pa.field("condition", pa.string()),  # "correct-random" etc. for paired differences
        pa.field("variant", pa.string()),
        pa.field("group", pa.string()),  # "all" or "<column>=<value>" breakdowns
        pa.field("kind", pa.string()),  # "value" or "paired_diff"
        pa.field("metric", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("ci_low", pa.float64()),
        pa.field("ci_high", pa.float64()),
        pa.field("n", pa.int64()),
        pa.field("definition", pa.string()),
        # the CI's resampled unit ("item"; "clip" where items of the cell share clips; a scorer's own unit such as
        # "recording") and how many there were; null for rows without a CI
        pa.field("ci_unit", pa.string()),
        pa.field("clusters", pa.int64()),
        # paired differences: "mcnemar_exact" (accuracy, 0/1 outcomes) with its p-value, Holm-adjusted over the
        # run's tests, or "paired_bootstrap" (the CI alone, no p-value)
        pa.field("test", pa.string()),
        pa.field("p_value", pa.float64()),
        pa.field("p_adjusted", pa.float64()),
        pa.field("correction", pa.string()),
    ]
)

ERRORS = pa.schema(
    [
        pa.field("table", pa.string()),  # items / requests
        pa.field("request_id", pa.string()),
        pa.field("dataset", pa.string()),
        pa.field("item_id", pa.string()),
        pa.field("model", pa.string()),
        pa.field("condition", pa.string()),
        pa.field("error_stage", pa.string()),
        pa.field("error_class", pa.string()),
        pa.field("error", pa.string()),
    ]
)


def strict_name(metric: str) -> str:
    """The strict twin of a figure: ``accuracy`` → ``accuracy_strict``, ``accuracy_with_errors`` →
    ``accuracy_strict_with_errors`` (``_with_errors`` stays last: it says what the denominator holds)."""
    head, sep, tail = metric.partition("_with_errors")
    return f"{head}{STRICT}{sep}{tail}"


def quirks_of(definition: str | None) -> str | None:
    """The quirks named at the end of a :data:`VERDICTS_DIFFER` row's definition (None if it names none)."""
    text = str(definition or "")
    return text.rsplit(QUIRKS, 1)[1].strip() or None if QUIRKS in text else None


def empty(schema: pa.Schema) -> pa.Table:
    """An empty table of ``schema``."""
    return schema.empty_table()


def conform(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows (dicts) → table of ``schema``; missing keys become nulls, extras are dropped."""
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.Table.from_pydict(cols, schema=schema)


def protocol_kind(row: dict) -> str:
    """The kind of a request/score row's protocol: ``protocol_kind``, else (rows written before protocol
    instances had names of their own) the protocol's name, which then was its kind."""
    kind = row.get("protocol_kind")
    return kind if isinstance(kind, str) and kind else str(row.get("protocol"))


#: the recorded ``model_info`` backend of a reference-rewrite system (:mod:`evalcore.models.reference_rewrite`)
REWRITE_BACKEND = "ReferenceRewrite"
#: the roles a reference-rewrite system can play (the skyline's two sides): the names of the rewrite templates
#: its generation settings record (``models/reference_rewrite.py``; a test keeps the two in step)
REWRITE_ROLES = ("paraphrase", "adversarial")
#: the summary's ``model`` of the paired difference paraphrase skyline − adversarial rewrite
REWRITE_LABEL = "paraphrase-adversarial"


def rewrite_roles(model_infos: Mapping[str, Any]) -> dict[str, str]:
    """model name → ``paraphrase`` | ``adversarial`` for the reference-rewrite systems among ``model_infos``
    (name → recorded ``model_info``, a dict or its JSON): backend ``ReferenceRewrite``, role = the name of
    the rewrite template its generation settings record (e.g. ``paraphrase@1``)."""
    roles = {}
    for name, info in model_infos.items():
        if isinstance(info, str):
            try:
                info = json.loads(info)
            except json.JSONDecodeError:
                continue
        if not isinstance(info, dict) or info.get("backend") != REWRITE_BACKEND:
            continue
        template = str((info.get("generation") or {}).get("template") or "").split("@", 1)[0]
        if template in REWRITE_ROLES:
            roles[name] = template
    return roles
