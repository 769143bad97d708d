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

Constructor params declare their *values* too, with the constrained types below (:data:`Count`,
:data:`Seconds`, :data:`Rate`, :data:`Positive`, :data:`NonNegative`, :data:`PathStr`, :data:`NonEmpty`), so
``n_clips: 0`` fails ``evalcore validate`` as ``datasets.0.params.n_clips: must be >= 1, got 0``, not as an
empty run.

Mistakes come back as one line per field, ``<where>.<field>: <reason>``, with a "did you mean" for an
unknown field.
"""

from __future__ import annotations

import difflib
import inspect
import os
import typing
from functools import lru_cache
from typing import Annotated, Any, Iterable

import pyarrow.fs as pafs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from evalcore.core import storage
from evalcore.core.errors import bounded

#: how many of something (clips, rows, tokens, threads, requests per minute): at least one
Count = Annotated[int, Field(ge=1)]
#: a count that may be zero (retries, deliberately broken clips)
NonNegative = Annotated[int, Field(ge=0)]
#: a duration in seconds (clip length, timeout, window)
Seconds = Annotated[float, Field(gt=0)]
#: samples per second
Rate = Annotated[int, Field(gt=0)]
#: any other quantity that must be above zero (audio tokens per second)
Positive = Annotated[float, Field(gt=0)]
#: a local path, s3:// URI or file name pattern: never empty
PathStr = Annotated[str, Field(min_length=1)]
#: a name or URL that must not be empty (an endpoint's base_url, a served model's name)
NonEmpty = Annotated[str, Field(min_length=1)]

_BOUNDS = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"),
           "less_than_equal": ("<=", "le"), "less_than": ("<", "lt")}


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


def value_reason(err: dict) -> str | None:
    """A pydantic bound or emptiness error in the project's words (``must be >= 1, got 0``), else None."""
    ctx = err.get("ctx") or {}
    if err["type"] in _BOUNDS:
        op, key = _BOUNDS[err["type"]]
        bound = ctx.get(key)
        return f"must be {op} {format(bound, 'g') if isinstance(bound, (int, float)) else bound}, " \
               f"got {str(err.get('input'))[:60]}"
    if err["type"] in ("string_too_short", "too_short") and ctx.get("min_length") == 1:
        return "must not be empty"
    return None


def _reason(err: dict, fields: Iterable[str]) -> str:
    if (said := value_reason(err)) is not None:
        return said
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


def _is_tag(part: Any) -> bool:
    """A union branch's name in a pydantic error location (``constrained-str``), not a field or index."""
    return isinstance(part, str) and not part.isidentifier()


def _union_errors(errors: list[dict]) -> list[dict]:
    """Errors with union branch names dropped from their locations; of a union's branches only those that got
    deepest into the value are kept (``audio_root: ['a', '']`` is about ``audio_root.1``, not "not a string")."""
    deepest: dict[Any, int] = {}
    cleaned = []
    for err in errors:
        loc = tuple(p for p in err["loc"] if not _is_tag(p))
        tagged = len(loc) != len(err["loc"])
        if tagged:
            deepest[loc[:1]] = max(deepest.get(loc[:1], 0), len(loc))
        cleaned.append(({**err, "loc": loc}, tagged))
    return [err for err, tagged in cleaned if not tagged or len(err["loc"]) == deepest[err["loc"][:1]]]


def check_params(cls: type, params: Any) -> None:
    """Raise :class:`ParamsError` (one problem per field) when ``params`` do not fit ``cls``'s schema."""
    if not isinstance(params, dict):
        raise ParamsError([("", f"expected a mapping, got {type(params).__name__}")])
    schema = params_schema(cls)
    try:
        schema.model_validate(params)
    except ValidationError as e:
        found: dict[str, list[str]] = {}
        for err in _union_errors(e.errors()):
            field, reason = _field_and_reason(err, schema.model_fields)
            if reason not in found.setdefault(field, []):
                found[field].append(reason)
        raise ParamsError([(f, " or ".join(reasons)) for f, reasons in found.items()]) from None


def _missing(uri: str, what: str) -> str | None:
    """Why ``uri`` is not an existing ``what`` (file / dir), or None; s3:// prefixes count as directories."""
    if storage.is_s3(uri):
        try:
            fs, path = storage.resolve(uri)
            info = fs.get_file_info(path)
            if info.type == pafs.FileType.NotFound and what == "dir":
                found = fs.get_file_info(pafs.FileSelector(path.rstrip("/"), recursive=False,
                                                           allow_not_found=True))
                return None if found else f"{uri!r} does not exist (no object under this prefix)"
        except (OSError, ValueError) as e:
            return f"cannot check {uri!r}: {bounded(str(e), 200)}"
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
