"""How a tiny random-weight checkpoint's greedy answers end (:func:`evalcore.models.tiny.build_tiny`).

A random language model rarely emits its end-of-turn token: left alone, nearly every answer runs to
``max_new_tokens`` and becomes an ``incomplete`` error row. Two edits of the weights make answers end:

* :func:`end_every_answer` (``evalcore make-checkpoint --ends-answers``): every answer ends right after its first
  token, so a dry run's rows are answers (one token of nonsense each), judged and scored. One coordinate ``k`` of
  the language model's residual stream becomes a "stop mark": no layer writes to it (row ``k`` of every attention
  and MLP output projection is zero), every token's input embedding holds ``STOP_MARK`` there except the end-of-turn
  token and the token that closes the chat template before the answer (0), and the output layer reads ``k`` only
  into the end-of-turn token (``STOP_LOGIT``). So after any token the model emits, the end-of-turn token wins by a
  wide margin (its logit is hundreds, the random ones a few units), while after the template's closing token its
  logit is exactly 0, below the largest random logit: the first token is the model's own. An answer runs on only if
  the model emits the template's closing token itself, again and again.
* :func:`end_some_answers` (the tests' checkpoints): the end-of-turn token's output row becomes a slightly larger
  copy of the row of a token the random model likes to emit, so some answers end within a few tokens and others
  run to the limit: the tests need both kinds.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import numpy as np

SR = 16_000
#: the stop mark in a stop token's embedding, and what the output layer multiplies it by for the end-of-turn token
STOP_MARK = 1.0
STOP_LOGIT = 1000.0
#: the probes that find the token closing the chat template: a prompt of each protocol's default shape
PROMPTS = ("Describe the music in one sentence.", "Which instruments can you hear?",
           "Question: Is this recording fast or slow?\nOptions:\n(A) slow\n(B) fast\nThe correct answer is:",
           "What is the tempo of this piece in BPM?")

Encode = Callable[[Any, str, "np.ndarray | None"], Any]


def probe_audio(kind: str, seconds: float) -> np.ndarray | None:
    """A probe's audio: none or a 330 Hz tone."""
    if kind == "none":
        return None
    return (0.3 * np.sin(2 * np.pi * 330.0 * np.arange(int(SR * seconds)) / SR)).astype(np.float32)


def encode_probe(processor: Any, prompt: str, audio: np.ndarray | None, encode: Encode | None = None) -> Any:
    """A probe's model inputs: ``encode(processor, prompt, audio)`` where the chat template cannot make them
    (Voxtral), else the processor renders the template and encodes text and audio."""
    if encode is not None:
        return encode(processor, prompt, audio)
    content = ([{"type": "audio"}] if audio is not None else []) + [{"type": "text", "text": prompt}]
    text = processor.apply_chat_template([[{"role": "user", "content": content}]], tokenize=False,
                                         add_generation_prompt=True)[0]
    kwargs: dict[str, Any] = {"text": [text], "return_tensors": "pt"}
    if audio is not None:
        kwargs.update(audio=[audio], sampling_rate=SR)
    return processor(**kwargs)


def _answer(model: Any, enc: Any, limit: int, pad: int, eos: int | None) -> list[int]:
    """The greedy answer's new token ids (at most ``limit``; with ``eos``, ending at it)."""
    import torch

    with torch.inference_mode():
        out = model.generate(**enc, max_new_tokens=limit, do_sample=False, eos_token_id=eos, pad_token_id=pad)
    return out[0, enc["input_ids"].shape[1]:].tolist()


def end_some_answers(model: Any, processor: Any, eos: int, encode: Encode | None = None) -> None:
    """Make the EOS row of the output layer a 1.05× copy of the row of the token greedy decoding emits most often
    on a few probe requests (text only and with noise as audio): wherever that token would win with a positive
    logit, EOS wins instead."""
    import torch

    rng = np.random.default_rng(0)
    seen: Counter[int] = Counter()
    for i, prompt in enumerate(["Describe the music in one sentence.", "What instruments are playing?"] * 2):
        audio = (0.3 * rng.standard_normal(SR * (i + 1))).astype(np.float32) if i >= 2 else None
        enc = encode_probe(processor, prompt, audio, encode)
        seen.update(_answer(model, enc, 16, processor.tokenizer.pad_token_id, None))
    liked = max(sorted(seen), key=lambda t: seen[t])
    head = model.get_output_embeddings().weight
    with torch.no_grad():
        head[eos] = head[liked] * 1.05


def _writers(model: Any) -> list[Any]:
    """The language model's layers that write into its residual stream (attention and MLP output projections)."""
    return [m for name, m in model.named_modules()
            if ".language_model." in f".{name}." and name.endswith(("self_attn.o_proj", "mlp.down_proj"))]


def end_every_answer(model: Any, processor: Any, eos: int, encode: Encode | None = None) -> None:
    """Make every greedy answer end right after its first token (module docstring)."""
    import torch

    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    writers = _writers(model)
    if not writers:
        raise ValueError("no language-model output projections found: cannot place the stop mark")
    # the token that closes the chat template before every answer: no stop mark (else every answer would be empty)
    closing = {int(encode_probe(processor, prompt, probe_audio(kind, 1.0), encode)["input_ids"][0, -1])
               for prompt in PROMPTS for kind in ("none", "tone")}
    k = emb.shape[1] - 1
    with torch.no_grad():
        for m in writers:
            m.weight[k].zero_()
            if getattr(m, "bias", None) is not None:
                m.bias[k].zero_()
        emb[:, k] = STOP_MARK
        emb[sorted(closing | {eos}), k] = 0.0
        head[:, k] = 0.0
        head[eos] = 0.0
        head[eos, k] = STOP_LOGIT
