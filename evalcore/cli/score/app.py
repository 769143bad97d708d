"""The ``evalcore score`` command group; each protocol's module adds its command to ``score_app``."""

from __future__ import annotations

import typer

score_app = typer.Typer(no_args_is_help=True, help="Score existing model outputs without running a model.")
