"""A nightly checkpoint's training step, for the trackers' x axis.

``trainer_state.json`` in the checkpoint (what Hugging Face's ``Trainer`` saves beside its weights) gives it as
``global_step`` and wins when present and readable; else the series' ``step_pattern`` (a regular expression whose
first group is the step; default the name's last run of digits: ``step-1500`` → 1500, ``checkpoint-500`` → 500).
A checkpoint with neither has no step (None): the nightly then uses its position in the series and says so.
"""

from __future__ import annotations

import json
import re

from evalcore.core import storage

TRAINER_STATE = "trainer_state.json"
DEFAULT_PATTERN = r"(\d+)(?!.*\d)"


def from_trainer_state(uri: str) -> int | None:
    """``global_step`` of ``<uri>/trainer_state.json``, or None when there is none or it holds no integer step."""
    try:
        state = json.loads(storage.read_text(storage.join(uri, TRAINER_STATE)))
    except (OSError, ValueError):
        return None
    step = state.get("global_step") if isinstance(state, dict) else None
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None


def from_name(name: str, pattern: str = DEFAULT_PATTERN) -> int | None:
    """The first group of ``pattern`` searched in ``name``, as an integer (None when it does not match)."""
    m = re.search(pattern, name)
    if m is None or not m.groups() or m.group(1) is None:
        return None
    try:
        return int(m.group(1))
    except ValueError:
        return None


def training_step(uri: str, name: str, pattern: str = DEFAULT_PATTERN) -> int | None:
    """The checkpoint's training step: ``trainer_state.json``'s ``global_step``, else from its name."""
    found = from_trainer_state(uri)
    return found if found is not None else from_name(name, pattern)
