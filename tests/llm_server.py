"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

Runs ``http.server.ThreadingHTTPServer`` in a thread on 127.0.0.1 (port 0). It answers
``POST /v1/chat/completions`` deterministically, enforces an RPM and a TPM limit over a
sliding window (configurable length, 60 s by default), injects faults from a scripted
schedule, and records every request (Authorization header excluded) for assertions.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import random
import threading
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

FAULT_KINDS = ("429", "500", "slow", "hang", "malformed")


@dataclass(frozen=True)
class Fault:
    """One injected fault: ``kind`` in FAULT_KINDS; ``seconds`` = Retry-After / sleep length."""

    kind: str
    seconds: float = 0.2

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {self.kind!r}")


@dataclass
class FaultSchedule:
    """Faults by request index (0-based arrival order) and/or by probability with a seed.

    The random draw for request ``i`` depends only on (seed, i), not on thread timing.
    """

    by_index: dict[int, Fault] = field(default_factory=dict)
    probabilities: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def fault_for(self, index: int) -> Fault | None:
        if index in self.by_index:
            return self.by_index[index]
        if not self.probabilities:
            return None
        u = random.Random(self.seed * 1_000_003 + index).random()
        acc = 0.0
        for kind, p in sorted(self.probabilities.items()):
            acc += p
            if u < acc:
                return Fault(kind, self.seconds.get(kind, 0.2))
        return None


@dataclass
class RecordedRequest:
    """What the server saw: arrival time (monotonic and wall), headers minus Authorization, body."""

    index: int
    t: float
    wall: float
    headers: dict[str, str]
    body: bytes
    auth_sha256: str | None
    status: int = 0
    fault: str | None = None


def default_answer(messages: list[dict]) -> str:
    """Echo a hash of the messages (deterministic)."""
    blob = json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()
    return "echo:" + hashlib.sha256(blob).hexdigest()[:16]


def count_tokens(text: str) -> int:
    """The server's token count: about four characters a token."""
    return max(1, math.ceil(len(text) / 4))


class LLMServer:
    """Start with ``with LLMServer(...) as srv:``; ``srv.base_url`` is the ``/v1`` URL."""

    def __init__(
        self,
        answer: Callable[[list[dict]], str] = default_answer,
        rpm: int | None = None,
        tpm: int | None = None,
        window_s: float = 60.0,
        faults: FaultSchedule | None = None,
    ) -> None:
        self.answer = answer
        self.rpm, self.tpm, self.window_s = rpm, tpm, window_s
        self.faults = faults or FaultSchedule()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._accepted: deque[tuple[float, int]] = deque()  # (time, tokens) inside the window
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> "LLMServer":
        owner = self

        class Handler(_Handler):
            server_owner = owner

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name="llm-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # wakes hanging handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # ---- assertions helpers ----------------------------------------------------------------
    def statuses(self) -> Counter:
        with self._lock:
            return Counter(r.status for r in self.requests)

    def rate_limited(self) -> int:
        """Number of 429s the limiter (not the fault schedule) returned."""
        with self._lock:
            return sum(1 for r in self.requests if r.status == 429 and r.fault is None)

    def per_second(self) -> Counter:
        """Arrivals per whole wall-clock second."""
        with self._lock:
            return Counter(int(r.wall) for r in self.requests)

    def max_in_window(self, window_s: float) -> int:
        """Most arrivals inside any sliding window of ``window_s`` seconds."""
        with self._lock:
            times = sorted(r.t for r in self.requests)
        best = 0
        for i, t in enumerate(times):
            j = bisect.bisect_left(times, t + window_s)
            best = max(best, j - i)
        return best

    # ---- request handling ------------------------------------------------------------------
    def _record(self, headers: dict[str, str], body: bytes, auth: str | None) -> RecordedRequest:
        with self._lock:
            rec = RecordedRequest(
                index=len(self.requests), t=time.monotonic(), wall=time.time(), headers=headers,
                body=body, auth_sha256=hashlib.sha256(auth.encode()).hexdigest() if auth else None,
            )
            self.requests.append(rec)
            return rec

    def _admit(self, now: float, tokens: int) -> tuple[bool, float, int, int]:
        """Sliding-window check → (ok, retry_after_s, remaining_requests, remaining_tokens)."""
        with self._lock:
            while self._accepted and self._accepted[0][0] <= now - self.window_s:
                self._accepted.popleft()
            used_req = len(self._accepted)
            used_tok = sum(t for _, t in self._accepted)
            over_req = self.rpm is not None and used_req + 1 > self.rpm
            over_tok = self.tpm is not None and used_tok + tokens > self.tpm
            rem_req = (self.rpm - used_req) if self.rpm is not None else 10**9
            rem_tok = (self.tpm - used_tok) if self.tpm is not None else 10**9
            if over_req or over_tok:
                oldest = self._accepted[0][0] if self._accepted else now
                return False, max(0.001, oldest + self.window_s - now), max(0, rem_req), max(0, rem_tok)
            self._accepted.append((now, tokens))
            return True, 0.0, rem_req - 1, rem_tok - tokens

    def reset_s(self, now: float) -> float:
        with self._lock:
            return (self._accepted[0][0] + self.window_s - now) if self._accepted else 0.0


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 drops bursts of new connections
    daemon_threads = True


class _Handler(BaseHTTPRequestHandler):
    server_owner: LLMServer
    protocol_version = "HTTP/1.1"
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:  # silence stderr
        pass

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self) -> None:  # noqa: N802
        srv = self.server_owner
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        auth = self.headers.get("Authorization")
        rec = srv._record(headers, body, auth.removeprefix("Bearer ") if auth else None)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            rec.status = 404
            return self._send(404, b'{"error": {"message": "not found"}}')
        try:
            req = json.loads(body)
            messages = req["messages"]
        except (ValueError, KeyError, TypeError):
            rec.status = 400
            return self._send(400, b'{"error": {"message": "bad request", "type": "invalid_request_error"}}')

        text = srv.answer(messages)
        prompt_tokens = sum(count_tokens(str(m.get("content", ""))) + 4 for m in messages)
        completion_tokens = count_tokens(text)
        now = time.monotonic()
        ok, retry_after, rem_req, rem_tok = srv._admit(now, prompt_tokens + completion_tokens)
        if not ok:
            rec.status = 429
            return self._send(429, _error("Rate limit reached", "rate_limit_exceeded"), {
                "Retry-After": str(math.ceil(retry_after)),
                "retry-after-ms": str(int(retry_after * 1000)),
                "x-ratelimit-remaining-requests": str(rem_req),
                "x-ratelimit-remaining-tokens": str(rem_tok),
            })

        fault = srv.faults.fault_for(rec.index)
        rec.fault = fault.kind if fault else None
        if fault and fault.kind == "429":
            rec.status = 429
            return self._send(429, _error("Rate limit reached (injected)", "rate_limit_exceeded"), {
                "Retry-After": str(math.ceil(fault.seconds)),
                "retry-after-ms": str(int(fault.seconds * 1000)),
            })
        if fault and fault.kind == "500":
            rec.status = 500
            return self._send(500, _error("The server had an error", "server_error"))
        if fault and fault.kind in ("slow", "hang"):
            srv._stop.wait(fault.seconds)
        if fault and fault.kind == "malformed":
            rec.status = 200
            return self._send(200, b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"ind')

        payload = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.get("model", "test-model"),
            "system_fingerprint": "fp_test",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        rec.status = 200
        self._send(200, json.dumps(payload).encode(), {
            "x-ratelimit-limit-requests": str(srv.rpm or 0),
            "x-ratelimit-remaining-requests": str(rem_req),
            "x-ratelimit-remaining-tokens": str(rem_tok),
            "x-ratelimit-reset-requests": f"{srv.reset_s(time.monotonic()):.3f}s",
        })


def _error(message: str, code: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": code, "param": None, "code": code}}).encode()


TEST_API_KEY_ENV = "EVALCORE_TEST_LLM_API_KEY"


def install_test_key() -> str:
    """Put a random fake API key into the environment (before Ray starts, so workers inherit it)."""
    import os

    return os.environ.setdefault(TEST_API_KEY_ENV, "sk-test-" + uuid.uuid4().hex)
