"""The ``evalcore score`` command group; each protocol module adds its command to ``score_app``."""

from __future__ import annotations

import importlib

import typer

score_app = typer.Typer(no_args_is_help=True, help="Score existing model outputs without running a model.")

#: modules defining ``evalcore score <protocol>`` commands (each decorates a function with ``@score_app.command``)
COMMAND_MODULES: list[str] = ["evalcore.scoring.mcq", "evalcore.scoring.factual", "evalcore.scoring.freeform"]


def load_commands() -> typer.Typer:
    for name in COMMAND_MODULES:
        importlib.import_module(name)
    return score_app
