"""Fingerprints of a finished run read from its files: :func:`digest` of any JSON-able value, and the run's
*suite fingerprint* (what two runs must share for their scores to be compared item by item).

The suite fingerprint hashes the run's ``config.yaml`` minus what is not the suite's (its models, storage, Ray
settings, name, the paper it reproduces, where its results are also sent: ``tracking``, and the error budget), the item set (audio
locations and metadata excluded) and the metric definitions of its summary. The nightly compares checkpoints of
one fingerprint (:mod:`evalcore.nightly.compare`); the trackers tag every run with it (:mod:`evalcore.tracking`).
"""

from __future__ import annotations

import hashlib
import json

import yaml

from evalcore import storage

#: config.yaml's top-level fields that are not the suite's (a comparison of checkpoints changes them freely; the
#: error budget decides an exit code, not a number)
NOT_THE_SUITE = ("models", "storage", "ray", "name", "reproduces", "published_values", "tracking", "max_error_rate")


def digest(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def suite_parts(run_root: str) -> dict:
    """What a run's suite fingerprint hashes: its config minus :data:`NOT_THE_SUITE`, its items (audio locations and
    metadata left out; sorted records of text) and its metric definitions (sorted (metric, definition) pairs)."""
    cfg = yaml.safe_load(storage.read_text(storage.join(run_root, "config.yaml"))) or {}
    for k in NOT_THE_SUITE:
        cfg.pop(k, None)
    items = storage.read_parquet(storage.join(run_root, "items")).to_pandas()
    items = items.drop(columns=[c for c in ("audio_uri", "metadata") if c in items.columns])
    items = items.sort_values(["dataset", "item_id"]).astype(str).to_dict("records")
    summary = storage.read_parquet(storage.join(run_root, "tables", "summary.parquet")).to_pandas()
    definitions = sorted({(m, d) for m, d in zip(summary["metric"], summary["definition"].astype(str))})
    return {"config": cfg, "items": items, "definitions": definitions}


def fingerprint_of(parts: dict) -> str:
    """The suite fingerprint of a run's :func:`suite_parts`."""
    return digest({"config": parts["config"], "items": digest(parts["items"]), "definitions": parts["definitions"]})


def suite_fingerprint(run_root: str) -> str:
    """Hash of the run's config minus its model (and storage, Ray, name, tracking, error budget), its item set and
    metric definitions."""
    return fingerprint_of(suite_parts(run_root))
