"""``evalcore score PROTOCOL INPUT --out DIR``: score existing model outputs without running a model.

The command line's faces of the scoring stage: each command reads its input rows, turns them into the judged
rows a run's judge stage writes and scores them as one job of the stage :mod:`evalcore.scoring` (via
:mod:`evalcore.cli.score.stage`); the steps the commands share are :mod:`evalcore.cli.score.steps`, the options
several take :mod:`evalcore.cli.score.option_groups`. Importing the package registers every command on
:data:`score_app`.
"""

from __future__ import annotations

from evalcore.cli.score import mcq, factual, freeform, cmi  # noqa: F401, I001  (registration, in the order --help lists)
from evalcore.cli.score.app import score_app

__all__ = ["score_app"]
