"""A call that ends by a deadline whatever the other side does.

Socket timeouts (``urllib``'s ``timeout``, httpx's) bound each *read*: a server that trickles a byte every few seconds
never trips them and holds the call for as long as it trickles. :func:`call_within` bounds the whole call: it runs
in a daemon thread and is given up at the deadline (``on_timeout`` may close what it holds, e.g. an HTTP client; the
thread itself ends when its socket does, and never keeps the process alive). Used by the endpoint ping
(:mod:`evalcore.llm.ping`) and the nightly's webhook (:mod:`evalcore.nightly.tonight`).
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


class DeadlineExceeded(TimeoutError):
    """The call had no complete answer by its deadline."""


def call_within(seconds: float, fn: Callable[[], T], on_timeout: Callable[[], object] | None = None) -> T:
    """``fn()``'s result, or its exception, if it ends within ``seconds``; else :class:`DeadlineExceeded`."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller as it is
            box["error"] = e

    thread = threading.Thread(target=target, daemon=True, name="evalcore-deadline")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if on_timeout is not None:
            try:
                on_timeout()
            except Exception:  # noqa: BLE001 - closing is a courtesy; the deadline stands
                pass
        raise DeadlineExceeded(f"no complete answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
