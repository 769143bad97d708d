"""Error rows: the failure class of an error, its bounded single-line reason, and the exit codes.

Every error row (an item that fails validation, a request that fails in any stage) carries
``error`` (a short tag, ':' and a human reason), ``error_stage`` (where it happened) and
``error_class`` (what kind of failure it is, which decides whether ``--resume`` tries it again):

* ``transient``  — the input may be fine; the world was not (connection refused or reset, timeouts,
  HTTP 408/409/425/429, a 5xx that is not a validation error, a Ray worker or actor that died).
  Retried by ``evalcore run --resume``.
* ``input``      — the input is bad: an unreadable or corrupt audio file, a malformed item row, a
  request the endpoint rejects as invalid (a 4xx, or a 5xx whose body is a validation error).
  Retrying gives the same answer.
* ``incomplete`` — the endpoint's answer did not finish: cut at the token limit
  (``finish_reason: "length"``) or stopped by a content filter. Never cached, never parsed.
* ``model``      — the Music LM raised (or answered unusably) on valid input.
* ``judge``      — a judge raised on a valid response.
* ``output``     — the model's answer is one no rule, judge or metric can read: a rule or judge raised on that
  answer alone (a recursion, an overflow, text that is not UTF-8), or an answer over its rule family's cap
  (docs/bad_inputs.md, "Bad answers"). The answer is what failed: retrying gives the same answer.

Reasons are stored bounded (:data:`MAX_REASON_CHARS`, the original length noted), on one line, with
long encoded payloads (base64 audio an endpoint echoed back) elided and bearer tokens masked: an error
row never carries a request's payload or a key.

Exit codes (:class:`ExitCode`), shared by every ``evalcore`` command: 0 ok, 1 the work failed part
way (resume it), 2 a usage or config mistake (nothing ran), 3 ``evalcore nightly``: a checkpoint evaluated tonight
regressed and its config says ``fail_on_regression``, 4 finished but nothing could be scored or the error budget was exceeded
(tables and report are written).
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Iterable

TRANSIENT = "transient"
INPUT = "input"
INCOMPLETE = "incomplete"
MODEL = "model"
JUDGE = "judge"
OUTPUT = "output"
CLASSES = (TRANSIENT, INPUT, INCOMPLETE, MODEL, JUDGE, OUTPUT)
#: the classes ``evalcore run --resume`` retries unless ``--retry-errors`` says otherwise
RETRY_BY_DEFAULT = (TRANSIENT,)

#: the class of an error whose site did not say, by its stage
STAGE_CLASS = {"load": INPUT, "expand": INPUT, "decode": INPUT, "model": MODEL, "judge": JUDGE,
               "score": OUTPUT, "pipeline": TRANSIENT}

MAX_REASON_CHARS = 2048

#: HTTP statuses that say "try again later", whatever the body
TRANSIENT_STATUS = frozenset({408, 409, 425, 429})

# runs of base64 / hex-like characters long enough to be a payload, not a word or an id
_PAYLOAD = re.compile(r"[A-Za-z0-9+/=_-]{200,}")
_BEARER = re.compile(r"(?i)(bearer\s+)[^\s'\"]+")
_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
_SPACE = re.compile(r"\s+")
# what a validation error (the request is invalid, not the server unwell) looks like in a response body:
# pydantic's messages (FastAPI, llama-cpp-python, vLLM), OpenAI's invalid_request_error, "validation error"
_VALIDATION = re.compile(
    r"validation error|invalid_request_error|unprocessable|input should be|field required|extra inputs are not"
    r"|value_error|type_error|literal_error|is not a valid|not supported|unsupported|invalid (?:value|type|request)",
    re.IGNORECASE)
# a refusal that names the structured-output request field
_RESPONSE_FORMAT = re.compile(r"response_format|response format|json_schema|json_object|guided_json"
                              r"|structured output", re.IGNORECASE)


class ExitCode(IntEnum):
    """The exit status of every ``evalcore`` command (docs/commands.md, "Exit codes")."""

    OK = 0
    FAILED = 1  # the work failed part way (a crash, storage or cluster failure): resume it
    USAGE = 2  # a usage or config mistake, found before any work
    REGRESSION = 3  # evalcore nightly: a checkpoint evaluated tonight regressed and the config says fail_on_regression
    UNSCORED = 4  # finished, but nothing could be scored or the error budget was exceeded


def bounded(text: object, cap: int = MAX_REASON_CHARS) -> str:
    """``text`` as a stored reason: one line, payload-like runs elided, keys masked, at most ``cap`` characters."""
    s = str(text)
    n = len(s)
    s = _PAYLOAD.sub(lambda m: f"<{len(m.group())} chars elided>", s)
    s = _KEY.sub("sk-***", _BEARER.sub(r"\1***", s))
    s = _SPACE.sub(" ", s).strip()
    if len(s) > cap:
        note = f" … [cut, {n} chars in all]"
        keep = s[: max(cap - len(note), 0)]
        space = len(keep) if s[len(keep):len(keep) + 1] == " " else keep.rfind(" ")
        if space > len(keep) * 3 // 4:  # end on a whole word ("Details: Co…" said nothing), unless that loses much
            keep = keep[:space]
        s = keep.rstrip() + note
    return s


def utf8_error(text: str) -> UnicodeEncodeError | None:
    """Why ``text`` is not UTF-8 text (a lone surrogate, which no Arrow table holds: a JSON ``\\ud800`` escape, a
    byte read with ``surrogateescape``), or None; its ``reason`` and ``start`` say what and where."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return e
    return None


def class_of(stage: str | None, given: str | None = None) -> str:
    """The failure class: ``given`` when the failing site knew it, else the stage's default."""
    if given in CLASSES:
        return given  # type: ignore[return-value]
    return STAGE_CLASS.get(stage or "", MODEL)


def is_validation_error(body: str) -> bool:
    """Whether an error body says the request itself is invalid (so sending it again cannot help)."""
    return bool(_VALIDATION.search(body or ""))


def names_response_format(body: str) -> bool:
    """Whether an error body refuses the structured-output field (``response_format``, json_schema …)."""
    return bool(_RESPONSE_FORMAT.search(body or ""))


def http_class(status: int, body: str) -> str:
    """The class of an HTTP error: transient (408/409/425/429, a 5xx that is not a validation error) or input."""
    if status in TRANSIENT_STATUS:
        return TRANSIENT
    if status >= 500:
        return INPUT if is_validation_error(body) else TRANSIENT
    return INPUT


_TRANSIENT_EXCEPTIONS = ("RayActorError", "ActorDiedError", "ActorUnavailableError", "WorkerCrashedError",
                         "NodeDiedError", "ObjectLostError", "OwnerDiedError", "ObjectReconstructionFailedError",
                         "RaySystemError", "LocalRayletDiedError", "GetTimeoutError", "APIConnectionError",
                         "APITimeoutError", "RateLimitError", "InternalServerError")


def exception_class(exc: BaseException) -> str | None:
    """The class an exception itself tells (its ``error_class``, or transient for Ray worker/actor death,
    connection failures and timeouts); None when only its stage can say."""
    given = getattr(exc, "error_class", None)
    if given in CLASSES:
        return given
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return TRANSIENT
    names = {t.__name__ for t in type(exc).__mro__}
    return TRANSIENT if names & set(_TRANSIENT_EXCEPTIONS) else None


def parse_classes(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"transient,judge"`` → the classes; raises ``ValueError`` naming an unknown one."""
    parts = [p.strip() for p in (text.split(",") if isinstance(text, str) else text) if p and p.strip()]
    unknown = [p for p in parts if p not in CLASSES]
    if unknown:
        raise ValueError(f"unknown error class(es) {', '.join(unknown)}; known: {', '.join(CLASSES)}")
    return tuple(dict.fromkeys(parts))
