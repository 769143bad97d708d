"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

Runs ``http.server.ThreadingHTTPServer`` in a thread on 127.0.0.1 (port 0). It answers
``POST /v1/chat/completions`` deterministically, enforces an RPM and a TPM limit over a
sliding window (configurable length, 60 s by default), injects faults from a scripted
schedule, and records every request (Authorization header excluded) for assertions.

It also serves a minimal Files + Batches API so the real ``openai`` client's ``files`` and
``batches`` resources work against it: ``POST /v1/files`` (multipart upload), ``GET
/v1/files/{id}`` and ``/v1/files/{id}/content``, ``POST /v1/batches``, ``GET
/v1/batches/{id}`` (``validating`` → ``in_progress`` → ``completed`` after ``batch_polls``
retrievals), ``GET /v1/batches?limit=&after=`` (newest first, cursor pages; a listing does not
advance any batch) and ``POST /v1/batches/{id}/cancel``. With ``hold_batch_create`` set, ``POST
/v1/batches`` creates the batch and then holds its response until ``release_batch_create()`` (at
most 60 s): a client can be killed after the server created a batch but before it saw the id;
``fail_batch_creates = n`` answers the next n creates with HTTP 503 without creating anything. A batch's lines are answered with the same
``answer`` function (no rate limit, no fault schedule), the output file lists them in
*reverse* order (clients must match by ``custom_id``), and ``batch_line_faults`` (0-based
input line → "error" | "http500" | "missing") injects a line in the error file, a non-200
line in the output file, or a line missing from both. ``batch_outcome`` "failed"/"expired"
ends batches in that state instead (an expired batch keeps the output of its first half).
``response_formats`` (e.g. ``("json_object",)``) lists the ``response_format`` types a chat
request may carry; any other type is refused with HTTP 400, like a server without that
feature (None: every type is accepted and ignored).

llama.cpp's own answers (``llama-cpp-python[server]`` 0.3.36, recorded from the real server; see
tests/llama_server.py for the server itself): ``llama_refusals=True`` answers a ``json_schema``
response format, and any message carrying an ``input_audio`` part, with llama.cpp's HTTP 500 whose
body is a pydantic validation error that echoes the request (the audio's base64 repeated per error).
An ``answer`` may return ``(text, finish_reason)``, e.g. ``("a", "length")`` for an answer cut at the
token limit. ``delay_s`` holds every chat answer that long (so identical requests overlap in flight);
:meth:`LLMServer.down` closes the port (connections are refused) and :meth:`LLMServer.up` opens it
again on the same port, like an endpoint that died and came back.

``GET /v1/models`` lists ``served_models`` (None, the default: answered 404, like a server without a model
listing); with ``api_key`` set, a request whose ``Authorization`` is not ``Bearer <api_key>`` is answered 401.
"""

from __future__ import annotations

import bisect
import email.parser
import email.policy
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
    path: str = ""  # "METHOD /path"


def default_answer(messages: list[dict]) -> str:
    """Echo a hash of the messages (deterministic)."""
    blob = json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()
    return "echo:" + hashlib.sha256(blob).hexdigest()[:16]


def parenthesised_letter(messages: list[dict]) -> str:
    """A scripted MCQ matcher: the letter the answer to classify puts in parentheses, else "none"."""
    import re

    answer = re.search(r'"""\n(.*)\n"""', messages[-1]["content"], re.DOTALL)
    m = re.search(r"\(([A-D])\)", answer.group(1) if answer else "")
    return m.group(1) if m else "none"


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
        batch_polls: int = 2,
        batch_line_faults: dict[int, str] | None = None,
        batch_outcome: str = "completed",
        response_formats: tuple[str, ...] | None = None,
        llama_refusals: bool = False,
        delay_s: float = 0.0,
        served_models: tuple[str, ...] | None = None,
        api_key: str | None = None,
    ) -> None:
        self.answer = answer
        self.served_models = served_models
        self.api_key = api_key
        self.llama_refusals = llama_refusals
        self.delay_s = delay_s
        self._port = 0
        self.batch_polls = batch_polls
        self.batch_line_faults = dict(batch_line_faults or {})
        self.batch_outcome = batch_outcome
        self.hold_batch_create = False
        self.fail_batch_creates = 0
        self._create_released = threading.Event()
        self.response_formats = response_formats
        self.files: dict[str, dict[str, Any]] = {}  # id -> metadata + "content" bytes
        self.batches: dict[str, dict[str, Any]] = {}  # id -> Batch JSON + "_polls"
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

        self._stop.clear()
        self._httpd = _Server(("127.0.0.1", self._port), Handler)
        self._port = self._httpd.server_address[1]
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

    def down(self) -> None:
        """Close the port: new connections are refused until :meth:`up` (requests in flight are cut)."""
        self.stop()
        self._httpd = None

    def up(self) -> None:
        """Listen again on the same port."""
        self.start()

    def chat_calls(self) -> int:
        """Chat completion requests that reached the server (every status)."""
        with self._lock:
            return sum(1 for r in self.requests if r.path.startswith("POST") and "chat/completions" in r.path)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._port, "server not started"
        return f"http://127.0.0.1:{self._port}/v1"

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

    def paths(self) -> list[str]:
        """``METHOD /path`` of every recorded request, in arrival order."""
        with self._lock:
            return [r.path for r in self.requests]

    # ---- files + batches ------------------------------------------------------------------
    def release_batch_create(self) -> None:
        """Let held ``POST /v1/batches`` responses go (see ``hold_batch_create``)."""
        self._create_released.set()

    def _list_batches(self, query: str) -> dict[str, Any]:
        from urllib.parse import parse_qs

        q = parse_qs(query)
        limit = max(1, min(100, int(q.get("limit", ["20"])[0])))
        after = q.get("after", [None])[0]
        with self._lock:
            newest_first = [{k: v for k, v in b.items() if not k.startswith("_")} for b in self.batches.values()][::-1]
        ids = [b["id"] for b in newest_first]
        start = ids.index(after) + 1 if after in ids else 0
        page = newest_first[start:start + limit]
        return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": start + limit < len(newest_first)}

    def _add_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        with self._lock:
            fid = f"file-{uuid.uuid4().hex[:24]}"
            meta = {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                    "filename": filename, "purpose": purpose, "status": "processed"}
            self.files[fid] = {**meta, "content": content}
            return meta

    def _batch_step(self, bid: str) -> dict[str, Any]:
        """One retrieval: advance the status; on the ``batch_polls``-th, produce the output."""
        with self._lock:
            b = self.batches[bid]
            if b["status"] in ("completed", "failed", "expired", "cancelled"):
                return b
            b["_polls"] += 1
            if b["_polls"] < self.batch_polls:
                b["status"] = "in_progress"
                b["in_progress_at"] = b["in_progress_at"] or int(time.time())
                return b
            lines = self.files[b["input_file_id"]]["content"].decode("utf-8").splitlines()
        if self.batch_outcome == "failed":
            with self._lock:
                b.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": [
                    {"code": "invalid_request", "message": "injected batch failure", "line": None, "param": None}]})
                return b
        keep = len(lines) // 2 if self.batch_outcome == "expired" else len(lines)
        out, err = [], []
        for i, line in enumerate(lines[:keep]):
            item = json.loads(line)
            fault = self.batch_line_faults.get(i)
            rid = f"batch_req_{uuid.uuid4().hex[:16]}"
            if fault == "missing":
                continue
            if fault == "error":
                err.append({"id": rid, "custom_id": item["custom_id"], "response": None,
                            "error": {"code": "injected_error", "message": "injected line failure"}})
                continue
            if fault == "http500":
                out.append({"id": rid, "custom_id": item["custom_id"], "error": None, "response": {
                    "status_code": 500, "request_id": rid,
                    "body": json.loads(_error("The server had an error", "server_error"))}})
                continue
            req = item["body"]
            text = self.answer(req["messages"])
            prompt_tokens = sum(count_tokens(str(m.get("content", ""))) + 4 for m in req["messages"])
            out.append({"id": rid, "custom_id": item["custom_id"], "error": None, "response": {
                "status_code": 200, "request_id": rid,
                "body": _chat_payload(req, text, prompt_tokens, count_tokens(text))}})
        out.reverse()  # order is not guaranteed by the real API either
        jsonl = lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode()  # noqa: E731
        out_meta = self._add_file(jsonl(out), f"{bid}_output.jsonl", "batch_output") if out else None
        err_meta = self._add_file(jsonl(err), f"{bid}_error.jsonl", "batch_output") if err else None
        now = int(time.time())
        with self._lock:
            b.update(status="expired" if self.batch_outcome == "expired" else "completed",
                     output_file_id=out_meta["id"] if out_meta else None,
                     error_file_id=err_meta["id"] if err_meta else None,
                     request_counts={"total": len(lines), "completed": sum(
                         1 for r in out if r["response"]["status_code"] == 200), "failed": len(err)})
            b["expired_at" if self.batch_outcome == "expired" else "completed_at"] = now
            return b

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

    def _recorded(self) -> tuple[bytes, RecordedRequest]:
        srv = self.server_owner
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        auth = self.headers.get("Authorization")
        rec = srv._record(headers, body, auth.removeprefix("Bearer ") if auth else None)
        rec.path = f"{self.command} {self.path}"
        return body, rec

    def _refused_key(self, rec: RecordedRequest) -> bool:
        """With ``api_key`` set: answer 401 (and say so) unless the request carries that key."""
        want = self.server_owner.api_key
        if want is None or self.headers.get("Authorization") == f"Bearer {want}":
            return False
        rec.status = 401
        self._send(401, _error("Incorrect API key provided", "invalid_api_key"))
        return True

    def do_GET(self) -> None:  # noqa: N802
        srv = self.server_owner
        _, rec = self._recorded()
        path = self.path.split("?", 1)[0].rstrip("/")
        parts = path.split("/")
        if self._refused_key(rec):
            return
        rec.status = 200
        if parts[-1] == "models" and srv.served_models is not None:
            return self._send(200, json.dumps({"object": "list", "data": [
                {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in srv.served_models]}).encode())
        if parts[-1] == "batches":
            query = self.path.split("?", 1)[1] if "?" in self.path else ""
            return self._send(200, json.dumps(srv._list_batches(query)).encode())
        if len(parts) >= 2 and parts[-2] == "batches" and parts[-1] in srv.batches:
            b = srv._batch_step(parts[-1])
            return self._send(200, json.dumps({k: v for k, v in b.items() if not k.startswith("_")}).encode())
        if len(parts) >= 2 and parts[-2] == "files" and parts[-1] in srv.files:
            meta = {k: v for k, v in srv.files[parts[-1]].items() if k != "content"}
            return self._send(200, json.dumps(meta).encode())
        if len(parts) >= 3 and parts[-1] == "content" and parts[-3] == "files" and parts[-2] in srv.files:
            return self._send(200, srv.files[parts[-2]]["content"], {"Content-Type": "application/octet-stream"})
        rec.status = 404
        self._send(404, _error("not found", "not_found"))

    def _post_files(self, body: bytes, rec: RecordedRequest) -> None:
        ctype = self.headers.get("Content-Type", "")
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        fields: dict[str, tuple[str | None, bytes]] = {}
        for part in msg.iter_parts() if msg.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
        if "file" not in fields or "purpose" not in fields:
            rec.status = 400
            return self._send(400, _error("file and purpose are required", "invalid_request_error"))
        filename, content = fields["file"]
        meta = self.server_owner._add_file(content, filename or "upload.jsonl", fields["purpose"][1].decode())
        rec.status = 200
        self._send(200, json.dumps(meta).encode())

    def _post_batches(self, body: bytes, rec: RecordedRequest, path: str) -> None:
        srv = self.server_owner
        parts = path.split("/")
        if parts[-1] == "cancel" and parts[-2] in srv.batches:
            with srv._lock:
                b = srv.batches[parts[-2]]
                if b["status"] not in ("completed", "failed", "expired"):
                    b.update(status="cancelled", cancelled_at=int(time.time()))
            rec.status = 200
            return self._send(200, json.dumps({k: v for k, v in b.items() if not k.startswith("_")}).encode())
        try:
            req = json.loads(body)
            fid, endpoint, window = req["input_file_id"], req["endpoint"], req["completion_window"]
        except (ValueError, KeyError, TypeError):
            rec.status = 400
            return self._send(400, _error("bad request", "invalid_request_error"))
        with srv._lock:
            fail, srv.fail_batch_creates = srv.fail_batch_creates > 0, max(0, srv.fail_batch_creates - 1)
        if fail:
            rec.status = 503
            return self._send(503, _error("injected: batch not created", "server_error"))
        if fid not in srv.files or endpoint != "/v1/chat/completions" or window != "24h":
            rec.status = 400
            return self._send(400, _error("invalid input_file_id, endpoint or completion_window",
                                          "invalid_request_error"))
        now = int(time.time())
        b = {"id": f"batch_{uuid.uuid4().hex[:24]}", "object": "batch", "endpoint": endpoint,
             "input_file_id": fid, "completion_window": window, "status": "validating", "created_at": now,
             "expires_at": now + 86400, "in_progress_at": None, "output_file_id": None, "error_file_id": None,
             "metadata": req.get("metadata"), "errors": None,
             "request_counts": {"total": 0, "completed": 0, "failed": 0}, "_polls": 0}
        with srv._lock:
            srv.batches[b["id"]] = b
        rec.status = 200
        if srv.hold_batch_create:  # created; the client has not seen the id yet
            deadline = time.monotonic() + 60
            while not srv._create_released.wait(0.05) and not srv._stop.is_set() and time.monotonic() < deadline:
                pass
        self._send(200, json.dumps({k: v for k, v in b.items() if not k.startswith("_")}).encode())

    def do_POST(self) -> None:  # noqa: N802
        srv = self.server_owner
        body, rec = self._recorded()
        if self._refused_key(rec):
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/files"):
            return self._post_files(body, rec)
        if "/batches" in path:
            return self._post_batches(body, rec, path)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            rec.status = 404
            return self._send(404, b'{"error": {"message": "not found"}}')
        try:
            req = json.loads(body)
            messages = req["messages"]
        except (ValueError, KeyError, TypeError):
            rec.status = 400
            return self._send(400, b'{"error": {"message": "bad request", "type": "invalid_request_error"}}')

        rf = req.get("response_format")
        rf_type = rf.get("type") if isinstance(rf, dict) else None
        if srv.llama_refusals:
            refusal = llama_refusal(req)
            if refusal is not None:
                rec.status = 500
                return self._send(500, refusal)
        if rf_type is not None and srv.response_formats is not None and rf_type not in srv.response_formats:
            rec.status = 400
            return self._send(400, _error(f"response_format of type {rf_type!r} is not supported",
                                          "invalid_request_error"))
        text = srv.answer(messages)
        text, finish_reason = text if isinstance(text, tuple) else (text, "stop")
        prompt_tokens = sum(count_tokens(str(m.get("content", ""))) + 4 for m in messages)
        completion_tokens = count_tokens(text)
        if srv.delay_s:
            srv._stop.wait(srv.delay_s)
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

        payload = _chat_payload(req, text, prompt_tokens, completion_tokens, finish_reason)
        rec.status = 200
        self._send(200, json.dumps(payload).encode(), {
            "x-ratelimit-limit-requests": str(srv.rpm or 0),
            "x-ratelimit-remaining-requests": str(rem_req),
            "x-ratelimit-remaining-tokens": str(rem_tok),
            "x-ratelimit-reset-requests": f"{srv.reset_s(time.monotonic()):.3f}s",
        })


def _chat_payload(req: dict, text: str, prompt_tokens: int, completion_tokens: int,
                  finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.get("model", "test-model"),
        "system_fingerprint": "fp_test",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": None},
            "logprobs": None,
            "finish_reason": finish_reason,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


_LLAMA_TRAILER = ('\n  File "/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line 376, '
                  'in create_chat_completion\n    POST /v1/chat/completions')
_PARTS = "list[union[ChatCompletionRequestMessageContentPartText,ChatCompletionRequestMessageContentPartImage]]"


def _llama_500(errors: list[dict]) -> bytes:
    """llama.cpp's (llama-cpp-python's) HTTP 500 body for a request its pydantic model rejects."""
    n = len(errors)
    message = f"{n} validation error{'s' if n > 1 else ''}:\n" + "".join(f"  {e!r}\n" for e in errors) + _LLAMA_TRAILER
    return json.dumps({"error": {"message": message, "type": "internal_server_error", "param": None,
                                 "code": None}}, separators=(",", ":")).encode()


def llama_refusal(req: dict) -> bytes | None:
    """llama.cpp's 500 for a ``json_schema`` response format or an ``input_audio`` content part, else None."""
    rf = req.get("response_format")
    if isinstance(rf, dict) and rf.get("type") not in (None, "text", "json_object"):
        return _llama_500([{"type": "literal_error", "loc": ("body", "response_format", "type"),
                            "msg": "Input should be 'text' or 'json_object'", "input": rf.get("type"),
                            "ctx": {"expected": "'text' or 'json_object'"}}])
    for i, m in enumerate(req.get("messages") or []):
        content = m.get("content")
        if not isinstance(content, list) or not any(isinstance(p, dict) and p.get("type") == "input_audio"
                                                    for p in content):
            continue
        j = next(k for k, p in enumerate(content) if isinstance(p, dict) and p.get("type") == "input_audio")
        part = content[j]
        role = m.get("role")
        errors: list[dict] = []
        for cls, want in (("System", "system"), ("User", None), ("Assistant", "assistant"), ("Tool", "tool"),
                          ("Function", "function")):
            name = f"ChatCompletionRequest{cls}Message"
            if want is None:
                errors += [
                    {"type": "string_type", "loc": ("body", "messages", i, name, "content", "str"),
                     "msg": "Input should be a valid string", "input": content},
                    *({"type": t, "loc": ("body", "messages", i, name, "content", _PARTS, j,
                                          f"ChatCompletionRequestMessageContentPart{kind}", field),
                       "msg": msg, "input": inp, **({"ctx": {"expected": f"'{lit}'"}} if t == "literal_error" else {})}
                      for kind, lit, extra in (("Text", "text", "text"), ("Image", "image_url", "image_url"))
                      for t, field, msg, inp in (("literal_error", "type", f"Input should be '{lit}'", "input_audio"),
                                                 ("missing", extra, "Field required", part)))]
                continue
            errors.append({"type": "literal_error", "loc": ("body", "messages", i, name, "role"),
                           "msg": f"Input should be '{want}'", "input": role, "ctx": {"expected": f"'{want}'"}})
            errors.append({"type": "string_type", "loc": ("body", "messages", i, name, "content"),
                           "msg": "Input should be a valid string", "input": content})
            if want in ("tool", "function"):
                errors.append({"type": "missing", "loc": ("body", "messages", i, name,
                                                          "tool_call_id" if want == "tool" else "name"),
                               "msg": "Field required", "input": m})
        return _llama_500(errors)
    return None


def _error(message: str, code: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": code, "param": None, "code": code}}).encode()


TEST_API_KEY_ENV = "EVALCORE_TEST_LLM_API_KEY"


#: a Batch API client as a separate process (argv: endpoint config JSON, requests JSON, cache root), for
#: tests that SIGKILL it mid-batch and check that a restart neither loses nor resubmits work
BATCH_POLLER = """
import json, sys
from evalcore.llm.batch import run_batch
from evalcore.llm.client import EndpointConfig
cfg, reqs, root = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
run_batch(EndpointConfig(**cfg), reqs, poll_interval_s=0.05, timeout_s=600, cache_root=root)
"""


def install_test_key() -> str:
    """Put a random fake API key into the environment (before Ray starts, so workers inherit it)."""
    import os

    return os.environ.setdefault(TEST_API_KEY_ENV, "sk-test-" + uuid.uuid4().hex)
