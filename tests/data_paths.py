"""Where the tests look for real data files that cannot live in the repository (docs/testing.md).

``EVALCORE_MUSICQA_JSON``: the released MusicQA evaluation file ``EvalMusicQA.json``; default
``../shared/data/musicqa/EvalMusicQA.json`` beside the clone. Tests that need it skip, naming the path,
when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

MUSICQA_ENV = "EVALCORE_MUSICQA_JSON"
MUSICQA_JSON = Path(os.environ.get(MUSICQA_ENV)
                    or Path(__file__).resolve().parents[2] / "shared" / "data" / "musicqa" / "EvalMusicQA.json")


def missing(path: Path) -> str:
    """The skip reason of a test without ``path``."""
    return f"real MusicQA data not found at {path} (set {MUSICQA_ENV}; see docs/testing.md)"
