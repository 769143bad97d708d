"""Fingerprints of a finished run read from its files: :func:`digest` of any JSON-able value, and the run's
*suite fingerprint* (what two runs must share for their scores to be compared item by item).

The suite fingerprint hashes the suite's fields of the run's ``config.yaml`` (:data:`SUITE`; every other field of
the run config is declared in :data:`NOT_THE_SUITE` with why: ``tests/test_fingerprint.py`` fails on a field of
:class:`evalcore.runconfig.config.RunConfig` that is in neither), the item set (audio locations and metadata excluded) and the
metric definitions of its summary. The nightly compares checkpoints of one fingerprint
(:mod:`evalcore.nightly.compare`); the trackers tag every run with it (:mod:`evalcore.tracking`).
"""

from __future__ import annotations

import hashlib
import json

import yaml

from evalcore.core import storage

#: the run config's fields (config.yaml's top-level keys) that make the suite, each with what it fixes
SUITE: dict[str, str] = {
    "datasets": "the items",
    "protocols": "how they are asked and scored",
    "seeds": "every random choice",
    "stats": "the intervals and tests of the figures",
    "model_card": "the report's model-card table (its published values' file): in the fingerprints recorded since "
                  "the card was added",
    "captions": "the descriptions the caption condition gives (an earlier run's answers); absent when null, so a "
                "run without it keeps the fingerprint it had before the field existed",
    "paraphraser": "the LLM and settings that paraphrase what the paraphrase conditions ask; absent when null",
}
#: suite fields and item columns added after fingerprints were first recorded: they enter the fingerprint only where
#: a run sets them (a config value that is not null, an item column some item fills)
LATER: frozenset[str] = frozenset({"captions", "caption", "paraphraser"})
#: the run config's fields that are not the suite's, each with why (a comparison of checkpoints changes them freely)
NOT_THE_SUITE: dict[str, str] = {
    "models": "the models compared",
    "storage": "where the run reads and writes",
    "ray": "where and how the run executes",
    "name": "a label",
    "reproduces": "the published tables set beside the run's figures, not a figure",
    "published_values": "the file those published values are read from",
    "tracking": "where results are also sent",
    "max_error_rate": "the error budget decides an exit code, not a number",
}


def digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def suite_config(config: dict) -> dict:
    """The suite's part of a run's config (its :data:`SUITE` fields, those the run wrote)."""
    return {k: v for k, v in config.items() if k in SUITE and not (k in LATER and v is None)}


def suite_parts(run_root: str) -> dict:
    """What a run's suite fingerprint hashes: its :func:`suite_config`, its items (audio locations and metadata left
    out; sorted records of text) and its metric definitions (sorted (metric, definition) pairs)."""
    cfg = suite_config(yaml.safe_load(storage.read_text(storage.join(run_root, "config.yaml"))) or {})
    items = storage.read_parquet(storage.join(run_root, "items")).to_pandas()
    items = items.drop(columns=[c for c in ("audio_uri", "metadata") if c in items.columns]
                       + [c for c in LATER if c in items.columns and items[c].isna().all()])
    items = items.sort_values(["dataset", "item_id"]).astype(str).to_dict("records")
    summary = storage.read_parquet(storage.join(run_root, "tables", "summary.parquet")).to_pandas()
    definitions = sorted({(m, d) for m, d in zip(summary["metric"], summary["definition"].astype(str))})
    return {"config": cfg, "items": items, "definitions": definitions}


def fingerprint_of(parts: dict) -> str:
    """The suite fingerprint of a run's :func:`suite_parts`."""
    return digest({"config": parts["config"], "items": digest(parts["items"]), "definitions": parts["definitions"]})


def suite_fingerprint(run_root: str) -> str:
    """Hash of the run's suite: its config's :data:`SUITE` fields, its item set and metric definitions."""
    return fingerprint_of(suite_parts(run_root))
