"""JSON Schemas of what users write: item rows (``items_file``) and the inputs of ``evalcore score``.

``evalcore schema items`` (or ``mcq``, ``factual``, ``factual-true_false``, ``factual-binary_choice``,
``freeform``) prints one. ``docs/items.md`` explains the same fields in prose; the checks that run are
``evalcore.datasets.validate`` (items) and ``evalcore.scoring`` (score inputs), which accept exactly these.
"""

from __future__ import annotations

from typing import Any

from evalcore.datasets.validate import ALIASES, FIELDS, MAX_ID_CHARS, MAX_TEXT_CHARS
from evalcore.kinds.base import KINDS
from evalcore.core.schema import MAX_EXCERPT_SECONDS

_TEXT = {"type": "string", "maxLength": MAX_TEXT_CHARS}
_TEXTS = {"type": "array", "items": _TEXT}
_INDEX = {"type": "integer", "minimum": 0, "maximum": 25}
_SECONDS = {"type": "number", "minimum": 0, "maximum": MAX_EXCERPT_SECONDS}

#: item field → (JSON Schema, description); the order of ``evalcore.core.schema.ITEM``
ITEM_FIELDS: dict[str, tuple[dict[str, Any], str]] = {
    "item_id": ({"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS},
                "unique within the dataset; names the item in every table"),
    "protocol": ({"enum": KINDS.names()}, "how the item is asked and scored (its kind)"),
    "task": ({"type": ["string", "null"], "maxLength": MAX_TEXT_CHARS},
             "e.g. instrument, genre, composer, caption; factual items: picks the judge's vocabulary"),
    "audio_uri": ({"type": "string", "minLength": 1, "maxLength": MAX_ID_CHARS},
                  "local path or s3:// URI; a relative path resolves against the dataset's audio_root, else the "
                  "items file's directory"),
    "excerpt_start": ({"type": ["number", "null"], "minimum": 0, "maximum": MAX_EXCERPT_SECONDS},
                      "seconds; null = from the start"),
    "excerpt_end": ({"type": ["number", "null"], "minimum": 0, "maximum": MAX_EXCERPT_SECONDS},
                    "seconds, after excerpt_start; null = to the end"),
    "question": ({**_TEXT, "minLength": 1}, "what the model is asked (the prompt variant's {question})"),
    "reference": ({"type": ["string", "null"], "maxLength": MAX_TEXT_CHARS},
                  "reference answer; required by freeform"),
    "labels": ({"type": ["array", "null"], "items": _TEXT},
               "ground-truth labels; factual: at least one; true_false: [\"yes\"] or [\"no\"]"),
    "options": ({"type": ["array", "null"], "items": _TEXT, "maxItems": 26},
                "answer options as written; mcq: 2-26 distinct; binary_choice: exactly 2; true_false: [the asked label]"),
    "correct_option": ({"type": ["integer", "null"], "minimum": 0, "maximum": 25},
                       "0-based index of the correct answer in options; required by mcq and binary_choice "
                       "(correct_index is accepted as another name for it)"),
    "category": ({"type": ["string", "null"], "maxLength": MAX_TEXT_CHARS}, "report breakdown (mcq); mir: the scoring rule (e.g. cmi_key)"),
    "difficulty": ({"type": ["string", "null"], "maxLength": MAX_TEXT_CHARS}, "report breakdown (mcq)"),
    "metadata": ({"type": ["object", "string", "null"]},
                 "a JSON object (or its text): free-form extras, e.g. genre for breakdowns"),
    "caption": ({"type": ["string", "null"], "maxLength": MAX_TEXT_CHARS},
                "a text description of the clip (e.g. its MusicCaps caption): what the caption condition gives in "
                "place of the audio"),
}
assert tuple(ITEM_FIELDS) == FIELDS, "ITEM_FIELDS must follow evalcore.core.schema.ITEM"

def items_schema() -> dict[str, Any]:
    """The JSON Schema of one item row."""
    props = {name: {**schema, "description": text} for name, (schema, text) in ITEM_FIELDS.items()}
    for alias, name in ALIASES.items():
        props[alias] = {**ITEM_FIELDS[name][0], "description": f"another name for {name} (give one of them)"}
    index_needed = {"anyOf": [{"required": ["correct_option"], "properties": {"correct_option": _INDEX}},
                              {"required": ["correct_index"], "properties": {"correct_index": _INDEX}}]}
    rules = [{"if": {"properties": {"protocol": {"const": p}}},
              "then": {**kind.row_schema, **({"allOf": [index_needed]} if kind.needs_correct_option else {})}}
             for p, kind in ((p, KINDS.get(p)) for p in KINDS.names()) if kind.row_schema or kind.needs_correct_option]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "evalcore item row",
        "description": "One line of an items_file (JSONL) or one row of its Parquet; see docs/items.md. The dataset "
                       "is named by the run config, never by the row.",
        "type": "object",
        "properties": props,
        "required": ["item_id", "protocol", "audio_uri", "question"],
        "additionalProperties": False,
        "allOf": rules,
    }


def _rows(title: str, required: list[str], props: dict[str, Any], note: str) -> dict[str, Any]:
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title, "description": note,
           "type": "object", "properties": props, "required": [c for c in required if c != "correct_option"],
           "additionalProperties": True}
    if "correct_option" in required:  # under either of its names
        out["anyOf"] = [{"required": ["correct_option"]}, {"required": ["correct_index"]}]
    return out


_ANSWER = {"type": ["string", "null"], "description": "the model's answer text (null = no answer: an error row)"}
_CORRECT = {"type": "integer", "minimum": 0,
            "description": "0-based index of the correct option in this row's options (as presented); "
                           "correct_index is accepted as another name for it"}
_GROUPS = "Other scalar columns (e.g. model, condition) group the summary."


def score_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of one input row of each ``evalcore score`` command."""
    return {
        "mcq": _rows("evalcore score mcq input row", ["question_id", "order_id", "options", "correct_option", "response"],
                     {"question_id": {"type": ["string", "integer"]}, "order_id": {"type": "integer"},
                      "options": _TEXTS, "correct_option": _CORRECT, "correct_index": _CORRECT, "response": _ANSWER},
                     "One question in one option order. " + _GROUPS),
        "factual": _rows("evalcore score factual input row", ["response", "labels"],
                         {"response": _ANSWER, "labels": _TEXTS, "item_id": {"type": "string"}},
                         "One answer and its ground-truth labels. " + _GROUPS),
        "factual-true_false": _rows("evalcore score factual --format true_false input row",
                                    ["response", "label", "truth"],
                                    {"response": _ANSWER, "label": {"type": "string"}, "truth": {"type": "boolean"},
                                     "item_id": {"type": "string"}, "chunk_index": {"type": "integer"}},
                                    "One yes/no question about one label. " + _GROUPS),
        "factual-binary_choice": _rows("evalcore score factual --format binary_choice input row",
                                       ["response", "options", "correct_option"],
                                       {"response": _ANSWER, "options": {**_TEXTS, "minItems": 2, "maxItems": 2},
                                        "correct_option": {**_CORRECT, "maximum": 1},
                                        "correct_index": {**_CORRECT, "maximum": 1},
                                        "item_id": {"type": "string"}, "chunk_index": {"type": "integer"}},
                                       "One two-option question. " + _GROUPS),
        "freeform": _rows("evalcore score freeform input row", ["candidate", "reference"],
                          {"candidate": _ANSWER, "reference": {"type": "string"}, "item_id": {"type": "string"},
                           "condition": {"type": "string"}}, "One answer and its reference. " + _GROUPS),
    }


def schema_names() -> list[str]:
    return ["items", *score_schemas()]


def schema(name: str) -> dict[str, Any]:
    """The schema called ``name`` (``items`` or a score input); KeyError naming the known ones."""
    if name == "items":
        return items_schema()
    schemas = score_schemas()
    if name not in schemas:
        raise KeyError(f"unknown schema {name!r}; known: {', '.join(schema_names())}")
    return schemas[name]
