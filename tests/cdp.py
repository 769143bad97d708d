"""Headless Chromium driven over the DevTools protocol, for page tests that read a page's live state (the item
browser's filters, an audio element's duration) rather than a dump of its DOM.

The protocol runs on a pipe (``--remote-debugging-pipe``): Chromium reads commands on its fd 3 and writes answers and
events on its fd 4, each one JSON message ended by a NUL byte. No port is opened and no library is needed.
:class:`Chromium` starts it (skipping without it, failing under ``CI=true``: :func:`chromium.require`), opens pages
in a window of a given size (:meth:`Chromium.page`), and :class:`Page` evaluates expressions (awaiting promises),
waits for a condition, types keys and takes screenshots. Every wait is bounded.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from chromium import require


class Chromium:
    """One headless Chromium with its DevTools pipe; use as a context manager."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        self.width, self.height = width, height
        cmd_r, self._cmd_w = os.pipe()
        self._out_r, out_w = os.pipe()

        def fds() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes back
            a, b = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 10), fcntl.fcntl(out_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [require(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={profile}", "--remote-debugging-pipe", f"--window-size={width},{height}",
             "--autoplay-policy=no-user-gesture-required", "--mute-audio", "about:blank"],
            preexec_fn=fds, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(cmd_r)
        os.close(out_w)
        self._next = 0
        self._answers: dict[int, Queue] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._out_r, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        q = self._answers.pop(msg["id"], None)
                    if q is not None:
                        q.put(msg)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict:
        """Send one command and return its result (raises on the protocol's error or after ``timeout`` s)."""
        q: Queue = Queue()
        with self._lock:
            self._next += 1
            n = self._next
            self._answers[n] = q
        msg: dict[str, Any] = {"id": n, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        try:
            got = q.get(timeout=timeout)
        except Empty:
            raise TimeoutError(f"{method}: no answer in {timeout} s") from None
        if "error" in got:
            raise RuntimeError(f"{method}: {got['error']}")
        return got.get("result", {})

    def page(self, url: str) -> "Page":
        """A new tab at ``url``, laid out at the window's width."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        page.send("Page.enable")
        page.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False})
        page.goto(url)
        return page

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - it may be gone already
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)
        for fd in (self._cmd_w, self._out_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    """One tab of :class:`Chromium`."""

    def __init__(self, browser: Chromium, session: str) -> None:
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None, timeout: float = 60.0) -> dict:
        return self.browser.send(method, params, self.session, timeout)

    def goto(self, url: str, timeout: float = 60.0) -> None:
        """Load ``url`` (a new document) and wait until it has loaded."""
        self.eval("window.__left = true")
        self.send("Page.navigate", {"url": url})
        self.wait("!window.__left && document.readyState === 'complete'", timeout)

    def eval(self, expression: str, timeout: float = 60.0) -> Any:
        """The value of a JavaScript expression (a promise is awaited)."""
        got = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True},
                        timeout)
        if "exceptionDetails" in got:
            raise RuntimeError(f"{expression[:80]}: {got['exceptionDetails'].get('exception', got['exceptionDetails'])}")
        return got["result"].get("value")

    def wait(self, expression: str, timeout: float = 60.0, every: float = 0.05) -> Any:
        """Poll ``expression`` until it is truthy; its value (raises TimeoutError after ``timeout`` s)."""
        end = time.monotonic() + timeout
        while True:
            try:
                value = self.eval(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > end:
                raise TimeoutError(f"not true after {timeout} s: {expression}")
            time.sleep(every)

    def key(self, key: str) -> None:
        """Type one key (``"j"``, ``"Escape"``) into the focused element."""
        text = key if len(key) == 1 else ""
        for kind in ("keyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "text": text if kind == "keyDown" else "",
                                                 "code": f"Key{key.upper()}" if len(key) == 1 else key})

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", params)["data"]))
        return path

    def widths(self) -> tuple[int, int]:
        """(scroll width, client width) of the document: it overflows sideways when the first is larger."""
        return tuple(self.eval("[document.documentElement.scrollWidth, document.documentElement.clientWidth]"))
