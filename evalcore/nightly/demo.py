"""The offline nightly demo: a local checkpoint series of the weight-free ``dsp_listener``.

``step-1000`` listens fully, ``step-2000`` is an identical copy (nothing may be flagged), ``step-3000`` is deaf
to timbre (its instrument questions must be flagged). Each checkpoint is a directory holding
``listener.json`` and the ``_SUCCESS`` ready marker.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from evalcore.core import storage
from evalcore.nightly.config import NightlyConfig, parse_nightly

DEMO_CHECKPOINTS = {"step-1000": [], "step-2000": [], "step-3000": ["timbre"]}


def demo_config_path() -> Path:
    return Path(__file__).resolve().parent.parent / "configs" / "nightly_demo.yaml"


def write_checkpoint(prefix: str, name: str, deaf_to: list[str]) -> str:
    """One listener checkpoint under ``prefix`` (``listener.json`` then the ready marker)."""
    uri = storage.join(prefix, name)
    storage.write_text(storage.join(uri, "listener.json"), json.dumps({"deaf_to": deaf_to}) + "\n")
    storage.write_text(storage.join(uri, "_SUCCESS"), "")
    return uri


def demo_config(root: str | None = None) -> NightlyConfig:
    """The demo nightly config rooted at ``root`` (default ./runs/nightly-demo), with its checkpoint series
    written there unless it exists already."""
    data = yaml.safe_load(demo_config_path().read_text(encoding="utf-8"))
    root = storage.absolute(root or str(Path("runs") / data["name"]))
    data["storage"] = {**data.get("storage", {}), "root": root}
    for s in data["series"]:
        s["prefix"] = storage.join(root, s["prefix"])
        for name, deaf in DEMO_CHECKPOINTS.items():
            if not storage.exists(storage.join(s["prefix"], name, "_SUCCESS")):
                write_checkpoint(s["prefix"], name, deaf)
    return parse_nightly(data)
