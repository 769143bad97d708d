"""A real llama.cpp server (``llama-cpp-python[server]``) on 127.0.0.1, with a tiny GGUF the test writes.

The server is the project's *other* OpenAI-compatible endpoint: evalcore did not write it, so the
fault-injection tests (tests/test_faults_llama.py) learn what a real server says. It runs from its own
virtual environment (the package compiles llama.cpp; ``.ci/run`` builds it once, see docs/testing.md), found at
``$EVALCORE_LLAMA_PYTHON`` or ``<repo>/.venv-llama/bin/python``.

The model (:func:`write_tiny_gguf`): a one-layer llama with a 32-dimensional residual stream and
weights chosen so that its next-token logits are the same at every position: every token embeds to
the same vector and attention and feed-forward add nothing, so the output layer alone ranks the
vocabulary. It ranks the token ``{"choice":"A"}`` first and the end-of-text token second. Hence:

* a plain chat completion repeats ``{"choice":"A"}`` until ``max_tokens``: ``finish_reason "length"``;
* with ``response_format`` ``json_object`` (a JSON grammar) the first token completes the object and
  the grammar then allows only the end: the answer ``{"choice":"A"}``, ``finish_reason "stop"``.

:class:`LlamaServer` starts the server, can kill it (SIGKILL) and start it again on the same port,
and counts the chat completions it answered from its own access log (server-side counts).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHOICE_TOKEN = '{"choice":"A"}'


def llama_python() -> str | None:
    """The interpreter of the llama.cpp server's venv, or None when it is not installed."""
    candidates = [os.environ.get("EVALCORE_LLAMA_PYTHON"), str(REPO / ".venv-llama" / "bin" / "python")]
    for c in candidates:
        if c and Path(c).exists():
            try:
                subprocess.run([c, "-c", "import llama_cpp.server"], check=True, capture_output=True, timeout=120)
            except (subprocess.SubprocessError, OSError):
                continue
            return c
    return None


def write_tiny_gguf(path: Path, n_embd: int = 32, n_ff: int = 64, n_ctx: int = 4096) -> Path:
    """A tiny llama GGUF whose greedy answer is fixed (module docstring); written with the ``gguf`` package."""
    import gguf

    pieces = ["<unk>", "<s>", "</s>", CHOICE_TOKEN, *(f"<0x{b:02X}>" for b in range(256)), "\u2581"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL, gguf.TokenType.NORMAL,
             *([gguf.TokenType.BYTE] * 256), gguf.TokenType.NORMAL]
    n_vocab = len(pieces)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("evalcore-tiny")
    w.add_context_length(n_ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(1)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(n_embd // 2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list([p.encode("utf-8") for p in pieces])
    w.add_token_scores([0.0] * n_vocab)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    f32 = np.float32
    output = np.zeros((n_vocab, n_embd), f32)
    output[3] = 2.0 / n_embd  # {"choice":"A"} first ...
    output[2] = 1.0 / n_embd  # ... then the end of text
    tensors = {
        "token_embd.weight": np.ones((n_vocab, n_embd), f32),
        "output_norm.weight": np.ones(n_embd, f32),
        "output.weight": output,
        "blk.0.attn_norm.weight": np.ones(n_embd, f32),
        "blk.0.attn_q.weight": np.zeros((n_embd, n_embd), f32),
        "blk.0.attn_k.weight": np.zeros((n_embd, n_embd), f32),
        "blk.0.attn_v.weight": np.zeros((n_embd, n_embd), f32),
        "blk.0.attn_output.weight": np.zeros((n_embd, n_embd), f32),
        "blk.0.ffn_norm.weight": np.ones(n_embd, f32),
        "blk.0.ffn_gate.weight": np.zeros((n_ff, n_embd), f32),
        "blk.0.ffn_up.weight": np.zeros((n_ff, n_embd), f32),
        "blk.0.ffn_down.weight": np.zeros((n_embd, n_ff), f32),
    }
    for name, t in tensors.items():
        w.add_tensor(name, t)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 (a process this test starts and stops itself)."""

    def __init__(self, python: str, model: Path, log: Path, n_ctx: int = 4096) -> None:
        self.python, self.model, self.log_path, self.n_ctx = python, model, log, n_ctx
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = 120.0) -> "LlamaServer":
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [self.python, "-m", "llama_cpp.server", "--model", str(self.model), "--host", "127.0.0.1",
             "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", "1", "--model_alias", "tiny"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited ({self.proc.returncode}); log: {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama.cpp server did not start in {timeout_s}s; log: {self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL, as an endpoint that dies would (the port is refused until :meth:`start`)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def completions(self) -> dict[int, int]:
        """Chat completions the server answered, by HTTP status, from its access log."""
        out: dict[int, int] = {}
        for m in re.finditer(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', self.log_path.read_text(errors="replace")):
            out[int(m.group(1))] = out.get(int(m.group(1)), 0) + 1
        return out

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":  # a manual look: python tests/llama_server.py
    import tempfile

    py = llama_python()
    if py is None:
        sys.exit("llama.cpp server not installed")
    d = Path(tempfile.mkdtemp())
    with LlamaServer(py, write_tiny_gguf(d / "tiny.gguf"), d / "server.log") as srv:
        print(srv.base_url, d)
        input("press enter to stop")
