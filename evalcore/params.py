"""The ``params`` a registered component takes, as a schema checked before anything is built.

Every dataset, model and judge declares its params in one of two ways:

* ``Params``: a frozen pydantic model on the class (``hf_audio_lm``: :class:`HFAudioParams`), for params
  with constraints of their own;
* by default, its constructor: names, type hints and defaults become a pydantic model
  (:func:`params_schema`), so a new component is one file plus its registration. A constructor that
  passes ``**kwargs`` on names where they go in ``params_extend`` (the LLM judges: the LLM runner, then
  its endpoint config); names the class sets itself are left out with ``params_exclude``.

Optional class attributes for what exists outside the config (checked by :func:`path_problems`, which
``evalcore validate`` and ``evalcore run`` call, ``--no-check-paths`` skips):

* ``path_params``: param name → ``"file"`` or ``"dir"``: local paths or ``s3://`` URIs that must exist;
* ``check_files(params)``: a classmethod reading small files only (never weights), e.g. that a
  checkpoint holds a config its backend recognises; raises ``ValueError("field: reason")``.

Mistakes come back as one line per field, ``<where>.<field>: <reason>``, with a "did you mean" for an
unknown field.
"""

from __future__ import annotations

import difflib
import inspect
import os
import typing
from functools import lru_cache
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, ValidationError, create_model


class ParamsError(ValueError):
    """Params that do not fit a component's schema: ``problems`` are ``(field path, reason)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in problems))
        self.problems = problems


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``unknown field; did you mean 'x'?`` (difflib), else the known names."""
    known = sorted(known)
    close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
    if close:
        return f"unknown field; did you mean {close[0]!r}?"
    return f"unknown field; known: {', '.join(known) or '(none)'}"


def _owned_inits(cls: type) -> list[Any]:
    """The ``__init__`` chain of ``cls`` that ``**kwargs`` pass through, most derived first."""
    return [c for c in cls.__mro__ if "__init__" in c.__dict__ and c is not object]


def _fields(target: Any, exclude: set[str]) -> dict[str, tuple[Any, Any]]:
    """name → (type, default) of what ``target`` (a class, function or pydantic model) accepts."""
    if isinstance(target, type) and issubclass(target, BaseModel):
        return {n: (f.annotation, f) for n, f in target.model_fields.items() if n not in exclude}
    chain = _owned_inits(target) if isinstance(target, type) else [None]
    out: dict[str, tuple[Any, Any]] = {}
    for owner in chain:
        fn = owner.__dict__["__init__"] if owner is not None else target
        hints = typing.get_type_hints(fn, include_extras=True)
        rest = False
        for p in list(inspect.signature(fn).parameters.values())[1 if owner is not None else 0:]:
            if p.kind is p.VAR_KEYWORD:
                rest = True
            elif p.kind is not p.VAR_POSITIONAL and p.name not in exclude and p.name not in out:
                default = ... if p.default is p.empty else p.default
                out[p.name] = (hints.get(p.name, Any), default)
        if not rest:
            return out
        extend = owner.__dict__.get("params_extend") if owner is not None else None
        if extend is not None:
            for t in extend:
                out.update({k: v for k, v in _fields(t, exclude).items() if k not in out})
            return out
    return out


@lru_cache(maxsize=None)
def params_schema(cls: type) -> type[BaseModel]:
    """The pydantic model of ``cls``'s params: its ``Params``, else one built from its constructor."""
    declared = getattr(cls, "Params", None)
    if isinstance(declared, type) and issubclass(declared, BaseModel):
        return declared
    fields = _fields(cls, set(getattr(cls, "params_exclude", ())))
    return create_model(f"{cls.__name__}Params", __config__=ConfigDict(extra="forbid", frozen=True,
                                                                       arbitrary_types_allowed=True), **fields)


def _reason(err: dict, fields: Iterable[str]) -> str:
    if err["type"] == "extra_forbidden":
        return did_you_mean(err["loc"][-1], fields) if len(err["loc"]) == 1 else "unknown field"
    if err["type"] == "missing":
        return "required field missing"
    if err["type"] in ("literal_error", "enum"):
        return f"{err['msg']}, got {str(err.get('input'))[:60]!r}"
    return err["msg"].removeprefix("Value error, ")


def _field_and_reason(err: dict, fields: Iterable[str]) -> tuple[str, str]:
    """A pydantic error as (field path, reason); a validator's ``"sub.field: reason"`` names a field within."""
    loc, reason = ".".join(str(x) for x in err["loc"]), _reason(err, fields)
    head, sep, rest = reason.partition(": ")
    if err["type"] == "value_error" and sep and head.replace("_", "").replace(".", "").isalnum():
        return (f"{loc}.{head}" if loc else head), rest
    return loc, reason


def check_params(cls: type, params: Any) -> None:
    """Raise :class:`ParamsError` (one problem per field) when ``params`` do not fit ``cls``'s schema."""
    if not isinstance(params, dict):
        raise ParamsError([("", f"expected a mapping, got {type(params).__name__}")])
    schema = params_schema(cls)
    try:
        schema.model_validate(params)
    except ValidationError as e:
        raise ParamsError([_field_and_reason(err, schema.model_fields) for err in e.errors()]) from None


def _missing(uri: str, what: str) -> str | None:
    """Why ``uri`` is not an existing ``what`` (file / dir), or None; s3:// prefixes count as directories."""
    from evalcore import storage

    if storage.is_s3(uri):
        import pyarrow.fs as pafs

        try:
            fs, path = storage.resolve(uri)
            info = fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound and what == "dir":
                found = fs.get_file_info(pafs.FileSelector(path.rstrip("/"), recursive=False,
                                                           allow_not_found=True))
                return None if found else f"{uri!r} does not exist (no object under this prefix)"
        except (OSError, ValueError) as e:
            return f"cannot check {uri!r}: {str(e).splitlines()[0][:200]}"
        return f"{uri!r} does not exist" if info.type == pafs.FileType.NotFound else None
    local = os.path.expanduser(uri.removeprefix("file://"))
    if not os.path.exists(local):
        return f"{uri!r} does not exist"
    if what == "file" and os.path.isdir(local):
        return f"{uri!r} is a directory, expected a file"
    if what == "dir" and not os.path.isdir(local):
        return f"{uri!r} is not a directory"
    return None


def path_problems(cls: type, params: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, reason) for every configured file of ``cls``'s params that does not exist or cannot be used."""
    out = []
    for name, what in getattr(cls, "path_params", {}).items():
        values = params.get(name)
        for i, v in enumerate(values if isinstance(values, (list, tuple)) else [values]):
            if isinstance(v, str) and v and (why := _missing(v, what)):
                out.append((f"{name}.{i}" if isinstance(values, (list, tuple)) else name, why))
    check = getattr(cls, "check_files", None)
    if not out and check is not None:
        try:
            check(params)
        except ValueError as e:
            field, _, reason = str(e).partition(": ")
            out.append((field, reason) if reason and " " not in field else ("", str(e)))
    return out
