"""The scoring boundary no answer crosses: every rule, judge and metric call on a model's answer goes through
:func:`guarded`, which turns **any** exception the call raises (``RecursionError``, ``MemoryError``,
``OverflowError``, ``UnicodeError``, a library's own) into a bounded one-line reason, so the answer becomes an error
row (stage ``score`` or ``judge``, class ``output``: :data:`evalcore.core.errors.OUTPUT`) and the run goes on.

A rule that raises is a defect to fix where it raises (the released rule's own stops are
:class:`~evalcore.mir_rules.rules.PublishedStops` with their reasons); the guard is what keeps such a defect from
costing a run, or every ``--resume`` of it (the answer is cached and replayed). ``KeyboardInterrupt`` and
``SystemExit`` pass: they are the operator's, not the answer's.

:func:`one_by_one` is the batch form: a call over a batch that raises is made again for each item alone, so one
answer fails alone and its neighbours are scored (the model stage's retry does the same for ``generate``).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from evalcore.core.errors import OUTPUT, bounded, exception_class, utf8_error

__all__ = ["guarded", "reason_of", "one_by_one", "judged", "Reason", "REASON_CHARS", "not_utf8"]

T = TypeVar("T")
#: the longest reason the guard writes (an exception's message may quote the whole answer)
REASON_CHARS = 300
#: a batch whose first answers, each alone, all fail with the batch's own reason is the callee's failure
SAME_FAILURES = 3


class Reason(str):
    """A guarded call's failure: its one-line reason, and ``error_class`` — what the exception itself tells
    (:func:`evalcore.core.errors.exception_class`: transient for a connection failure or a dead worker), else
    ``output``: the call raised on this answer; None where the callee fails whatever the answer (the stage's
    class)."""

    error_class: str | None = OUTPUT
    #: the exception cannot come of an answer's text (a file or module missing: ``OSError``, ``ImportError``)
    systematic: bool = False


def reason_of(label: str, exc: BaseException) -> Reason:
    """``label: ExceptionName: message``, on one line, at most :data:`REASON_CHARS` characters."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose str() fails (a surrogate in its text) still has a type
        message = "(message not printable)"
    out = Reason(bounded(f"{label}: {type(exc).__name__}: {message[:REASON_CHARS]}", REASON_CHARS))
    out.error_class = exception_class(exc) or OUTPUT
    out.systematic = isinstance(exc, (OSError, ImportError))
    return out


def guarded(label: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, Reason | None]:
    """``(fn(*args, **kwargs), None)``, or ``(None, reason)`` when it raises anything but an interrupt."""
    try:
        return fn(*args, **kwargs), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - the boundary: whatever an answer makes a rule raise
        return None, reason_of(label, e)


def one_by_one(label: str, fn: Callable[[list[Any]], Sequence[T]], items: list[Any]) -> list[T | Reason]:
    """``fn(items)``; where that raises (or returns a wrong count), ``fn([item])`` for each item alone: each item's
    result, or its :class:`Reason` where the item alone raises. A batch failure that is transient (a connection
    refused: :func:`evalcore.core.errors.exception_class`) or that no answer can cause (a file or module missing) is every
    item's reason, not tried item by item (an endpoint that is down would be called once per item); so is one that
    the first :data:`SAME_FAILURES` items alone each repeat word for word (the callee fails, whatever the answer)."""
    got, batch_why = guarded(label, fn, items)
    if batch_why is None and got is not None and len(got) == len(items):
        return list(got)
    if batch_why is not None and (batch_why.error_class != OUTPUT or batch_why.systematic):
        if batch_why.systematic and batch_why.error_class == OUTPUT:
            batch_why.error_class = None  # type: ignore[assignment]  # the callee's failure: the stage's class
        return [batch_why] * len(items)
    out: list[T | Reason] = []
    for n, item in enumerate(items):
        one, why = guarded(label, fn, [item])
        if why is None and (one is None or len(one) != 1):
            why = Reason(bounded(f"{label}: returned {0 if one is None else len(one)} results for one answer",
                                 REASON_CHARS))
        out.append(why if why is not None else one[0])  # type: ignore[index]
        if n + 1 == SAME_FAILURES < len(items) and batch_why is not None and all(o == batch_why for o in out):
            # the first answers alone each fail as the batch did: the callee fails (a model that does not load),
            # not the answers; every item gets the reason, class unsaid (the stage's own), nothing called again
            batch_why.error_class = None  # type: ignore[assignment]
            return [batch_why] * len(items)
    return out


def judged(label: str, fn: Callable[[list[Any]], Sequence[dict]], items: list[Any]) -> list[dict]:
    """:func:`one_by_one` for a judge: each item's result, an ``{"error", "error_class"}`` result where it raises."""
    return [{"error": str(r), "error_class": r.error_class} if isinstance(r, Reason) else r
            for r in one_by_one(label, fn, items)]


def not_utf8(text: Any) -> str | None:
    """Why a model's answer can be neither stored nor scored (text that is not UTF-8: a lone surrogate, which no
    Arrow table holds), or None: checked by the model stage on each answer and by the scoring stage on each row."""
    if isinstance(text, str) and (e := utf8_error(text)) is not None:
        return f"the answer is not valid UTF-8 text ({e.reason} at character {e.start})"
    return None
