"""Options that several ``evalcore score`` commands take, declared once: groups of them, ``--out`` and ``--group-by``.

A group is a frozen dataclass whose fields are its options, each written with :func:`option` (one line: default,
flag, help). A command takes a whole group with one parameter annotated by the group's class (``llm: LlmOptions =
LLM``) under :func:`takes_groups`, which lays the group's fields out in the command's signature in that parameter's
place (so ``--help`` lists them there, each under its own flag) and hands the command the group object built from
them. A new option of a group is one field; every command taking the group gets it.
"""

from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Callable, TypeVar

import typer
from pydantic import BaseModel

from evalcore.reports import console

F = TypeVar("F", bound=Callable[..., Any])


class OptionGroup:
    """The base of an option group (a frozen dataclass of :func:`option` fields)."""


def option(default: Any, *decls: str, help: str, sets: tuple[type[BaseModel], str] | None = None,  # noqa: A002
           **kw: Any) -> Any:
    """A group's field: ``default`` when the group is built in code, and the typer option a command shows
    (``sets``: the config model and field it sets, see :func:`config_option`)."""
    return field(default=default, metadata={"option": typer.Option(default, *decls, help=help, **kw), "sets": sets})


def config_option(model: type[BaseModel], name: str, *decls: str, **kw: Any) -> Any:
    """A group's field that sets field ``name`` of config model ``model``: its help is that field's description
    and its default the field's (``None`` for a required one), so the option and the config say it in one place."""
    spec = model.model_fields[name]
    default = None if spec.is_required() else spec.default
    return option(default, *decls, help=spec.description or "", sets=(model, name), **kw)


def flag_of(group: type[OptionGroup], model: type[BaseModel], name: str) -> str | None:
    """The flag of ``group``'s option that sets field ``name`` of config model ``model`` (None: no such option)."""
    for f in fields(group):  # type: ignore[arg-type]
        if f.metadata.get("sets") == (model, name):
            return f.metadata["option"].param_decls[0]
    return None


def _expanded(name: str, group: type[OptionGroup], kind: Any) -> list[inspect.Parameter]:
    """The command parameters of ``group`` taken as parameter ``name``: one per field, named ``<name>_<field>``."""
    hints = typing.get_type_hints(group)
    return [inspect.Parameter(f"{name}_{f.name}", kind, default=f.metadata["option"], annotation=hints[f.name])
            for f in fields(group)]  # type: ignore[arg-type]


def takes_groups(command: F) -> F:
    """``command`` with each parameter annotated by an :class:`OptionGroup` class laid out as the group's options
    (in its place) and given to it as the group object."""
    sig = inspect.signature(command, eval_str=True)
    groups = {p.name: p.annotation for p in sig.parameters.values()
              if isinstance(p.annotation, type) and issubclass(p.annotation, OptionGroup)}
    params = [q for p in sig.parameters.values()
              for q in (_expanded(p.name, groups[p.name], p.kind) if p.name in groups else [p])]

    @functools.wraps(command)
    def run(**kwargs: Any) -> Any:
        for name, group in groups.items():
            kwargs[name] = group(**{f.name: kwargs.pop(f"{name}_{f.name}") for f in fields(group)})
        return command(**kwargs)

    run.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
    return run  # type: ignore[return-value]


@dataclass(frozen=True)
class Common(OptionGroup):
    """The options every ``evalcore score`` command takes: the bootstrap's seed and resamples, and ``--quiet``."""

    seed: int = option(0, "--seed", help="Bootstrap seed.")
    resamples: int = option(1000, "--resamples", min=1, help="Bootstrap resamples.")
    quiet: bool = option(False, "--quiet", help=console.QUIET_HELP)


#: a command's default for its ``common: Common`` parameter (the options come from the command line)
COMMON = Common()


#: ``--out``, which every command takes
OUT: str = typer.Option(..., "--out", help="Output directory (local path or s3://).")


def input_argument(what: str) -> Any:
    """The ``INPUT`` argument of a command that reads one table (``what``: its rows, as the help says them)."""
    return typer.Argument(..., metavar="INPUT", help=f"Parquet or JSONL {what}")


def group_by_option(own: str) -> Any:
    """``--group-by`` of a command whose grouping columns :func:`evalcore.cli.score.steps.group_columns` checks
    (``own``: the input columns it never groups by, as its help names them)."""
    return typer.Option(None, "--group-by", help="Comma-separated grouping columns (default: every scalar column "
                                                 f"but {own}/item_id).")
