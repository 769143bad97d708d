"""Calls to servers evalcore does not control end by their deadline and never fail what called them: the
endpoint ping (documented at 10 s) and the nightly's webhook against a local server that trickles its answer a byte
at a time (each read is quick, the whole never comes), and the webhook against a server whose answer is not HTTP
(a bounded warning, not a crash). Servers on 127.0.0.1, started and stopped here; every loop is bounded."""

from __future__ import annotations

import logging
import socket
import threading
import time

import pytest

from evalcore.core.deadline import DeadlineExceeded, call_within
from evalcore.llm.ping import ping
from evalcore.nightly import tonight as tn
from evalcore.core.nightly_outcome import Tonight

SECRET = "T000/B000/TRICKLESECRET"


class Server:
    """A TCP server on 127.0.0.1 answering every connection with ``head`` and then, if ``trickle``, one byte every
    0.2 s (for at most 60 s, or until stopped)."""

    def __init__(self, head: bytes, trickle: bool) -> None:
        self.head, self.trickle = head, trickle
        self.stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(1.0)
            try:
                conn.recv(65536)  # the request (enough of it)
            except OSError:
                pass
            conn.sendall(self.head)
            deadline = time.monotonic() + 60
            while self.trickle and not self.stop.is_set() and time.monotonic() < deadline:
                conn.sendall(b"x")
                time.sleep(0.2)
        except OSError:
            pass
        finally:
            conn.close()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.sock.close()


TRICKLE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: "  # a header that never ends


def test_call_within_gives_up_at_the_deadline_and_passes_errors_through() -> None:
    t = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="within 0.3 s"):
        call_within(0.3, lambda: time.sleep(5))
    assert time.monotonic() - t < 2
    with pytest.raises(ZeroDivisionError):
        call_within(1, lambda: 1 / 0)
    assert call_within(1, lambda: 42) == 42


def test_a_trickling_endpoint_cannot_hold_the_ping(monkeypatch) -> None:
    """Finding 5: the ping's timeout bounded each read; a byte every 0.2 s held it as long as the server went on."""
    monkeypatch.setenv("EVALCORE_TEST_PING_KEY", "sk-ping-test")
    with Server(TRICKLE, trickle=True) as srv:
        t = time.monotonic()
        got = ping(f"http://127.0.0.1:{srv.port}/v1", "m", "EVALCORE_TEST_PING_KEY", timeout_s=1.5)
        took = time.monotonic() - t
    assert got == ("base_url", f"no answer from http://127.0.0.1:{srv.port}/v1 within 1.5 s")
    assert took < 4, took


def test_a_trickling_webhook_cannot_hold_the_night(tmp_path, monkeypatch, caplog) -> None:
    with Server(TRICKLE, trickle=True) as srv:
        monkeypatch.setenv("HOOK", f"http://127.0.0.1:{srv.port}/services/{SECRET}")
        t = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="evalcore"):
            ok = tn.notify("HOOK", Tonight("demo", "2026-11-27T03:00:00Z", str(tmp_path)), timeout_s=1.5)
        took = time.monotonic() - t
    assert ok is False and took < 4, took
    assert "DeadlineExceeded: no complete answer within 1.5 s" in caplog.text and SECRET not in caplog.text


def test_a_webhook_answering_something_that_is_not_http_never_fails_the_night(tmp_path, monkeypatch, caplog) -> None:
    """Finding 5: a non-HTTP status line raised BadStatusLine out of the night (exit 1), its text echoed whole."""
    junk = b"NOT-HTTP " + b"the server's own words " * 400 + b"\r\n\r\n"
    with Server(junk, trickle=False) as srv:
        monkeypatch.setenv("HOOK", f"http://127.0.0.1:{srv.port}/services/{SECRET}")
        with caplog.at_level(logging.WARNING, logger="evalcore"):
            ok = tn.notify("HOOK", Tonight("demo", "2026-11-27T03:00:00Z", str(tmp_path)), timeout_s=5)
    assert ok is False
    (line,) = [r.getMessage() for r in caplog.records if "webhook" in r.getMessage()]
    assert "BadStatusLine" in line and "$HOOK" in line and SECRET not in line and "127.0.0.1" not in line
    assert len(line) < 300 and "chars in all]" in line  # bounded, never the server's text whole
