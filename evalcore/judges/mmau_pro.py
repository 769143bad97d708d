"""MMAU-Pro's multiple-choice rule as an MCQ judge: the choice whose embedding is nearest the response's.

Source: github.com/sonalkum/MMAUPro, ``evaluate_mmau_pro_comprehensive.py`` (commit 960e93a4),
``evaluate_closedended_with_nvembed``: per question, the response alone and the question's choices together are
embedded with NV-Embed-v2 (``encode(texts, instruction="", max_length=4096)``), each embedding L2-normalised;
the chosen choice is the argmax of the response's dot product with each choice (its first index on a tie);
accuracy is the share whose chosen choice text equals the answer. So every response gets a choice: a refusal
("I cannot hear any audio") is mapped to whichever choice it is nearest.

Params: ``embedder`` — ``nv-embed-v2``, the published scorer (``model``: a local checkpoint folder or the hub
id ``nvidia/NV-Embed-v2``, loaded with transformers and ``trust_remote_code``; ``device`` as torch names it,
default cuda when there is one), or ``bag-of-words``, a weight-free stand-in that is **not** the published
scorer (cosine of lowercased word counts, words as MMAU's rule cuts them) for offline runs and tests. The
judge's version names the embedder, so the judged rows say which one decided.

Where evalcore departs, counted rather than guessed (both are ``parsed_index`` -1, unanswered):

* a response without any word character (``""``, "..."): the published scorer embeds the empty text and
  takes its argmax; ``empty_is_unanswered: false`` does the same;
* a tie for the highest similarity between choices (with real embeddings only identical texts tie; with the
  bag-of-words stand-in a response sharing no word with any choice ties them all): the published first index
  would be option A whatever it says, which after option shuffling is a random guess.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Callable, Literal, Sequence

import numpy as np

from evalcore.judges.base import JUDGES
from evalcore.judges.parser import ParserJudge

__all__ = ["nearest_choice", "bag_of_words", "McqMmauProJudge"]

_WORD = re.compile(r"\b\w+\b")
Embed = Callable[[Sequence[str]], np.ndarray]  # texts → one L2-normalised row per text


def nearest_choice(response: np.ndarray, choices: np.ndarray) -> int:
    """Index of the choice row with the highest dot product with ``response``; -1 on a tie for the highest."""
    sims = choices @ response
    best = np.flatnonzero(sims == sims.max())
    return int(best[0]) if len(best) == 1 else -1


def bag_of_words(texts: Sequence[str]) -> np.ndarray:
    """The stand-in embedder: L2-normalised word counts over the words of ``texts`` (a zero row for no words)."""
    counts = [Counter(_WORD.findall(t.lower())) for t in texts]
    vocab = sorted({w for c in counts for w in c})
    index = {w: i for i, w in enumerate(vocab)}
    out = np.zeros((len(texts), max(len(vocab), 1)))
    for row, c in enumerate(counts):
        for w, n in c.items():
            out[row, index[w]] = n
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


class _NVEmbed:
    """NV-Embed-v2 as the released evaluator calls it (loaded on first use)."""

    def __init__(self, model: str, device: str | None) -> None:
        import torch
        from transformers import AutoModel

        self.torch = torch
        self.model = AutoModel.from_pretrained(model, trust_remote_code=True)
        self.model.to(device or ("cuda" if torch.cuda.is_available() else "cpu"))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        with self.torch.no_grad():
            emb = self.model.encode(list(texts), instruction="", max_length=4096)
            emb = self.torch.nn.functional.normalize(emb, p=2, dim=1)
        return emb.float().cpu().numpy()


@JUDGES.register("mcq_mmau_pro")
class McqMmauProJudge(ParserJudge):
    """MCQ judge: the nearest choice by embedding similarity (module docstring)."""


    def __init__(self, embedder: Literal["nv-embed-v2", "bag-of-words"] = "nv-embed-v2",
                 model: str = "nvidia/NV-Embed-v2", device: str | None = None,
                 empty_is_unanswered: bool = True) -> None:
        self.embedder, self.model, self.device = embedder, model, device
        self.empty_is_unanswered = empty_is_unanswered
        self.version = f"1-{embedder}"
        self._embed: Embed | None = bag_of_words if embedder == "bag-of-words" else None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embed is None:
            self._embed = _NVEmbed(self.model, self.device)
        return self._embed(texts)

    def parse(self, text: str, options: Sequence[str]) -> int:  # type: ignore[override]
        """The chosen option's index for one response (-1 = unanswered)."""
        if self.empty_is_unanswered and not re.search(r"\w", text):
            return -1
        if self.embedder == "bag-of-words":  # one vocabulary for the response and its choices
            vecs = self.embed([text, *options])
            return nearest_choice(vecs[0], vecs[1:])
        return nearest_choice(self.embed([text])[0], self.embed(options))
