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
scorer (cosine of lowercased word counts, words as MMAU's rule cuts them) for offline runs and tests. Or
``similarity`` — another embedder by config, ``{kind: sentence_transformers | transformers_mean, path: <folder>}``
(:mod:`evalcore.core.embedders`: a response encoded without a prompt, as NV-Embed's ``instruction=""``), in place of
``embedder``. The judge's version names the embedder, so the judged rows say which one decided; what it needs to
import is checked by ``evalcore validate`` (:meth:`McqMmauProJudge.packages_problem`: NV-Embed-v2 needs torch and
transformers), so a run without them is refused before any model runs, not a benchmark of error rows.

Two verdicts per response (:class:`~evalcore.judges.base.PublishedRule`), from one set of similarities:

* ``credited`` — the published verdict, the default figure (``accuracy``): the released argmax, **the first
  choice on a tie** for the highest similarity, and a response without any word character (``""``, "...")
  embedded as it is and given its nearest choice, as released;
* ``parsed_index`` — evalcore's strict reading (``accuracy_strict``): a tie for the highest similarity is
  **unanswered** (-1: the first index after option shuffling is a guess; with the bag-of-words stand-in a
  response sharing no word with any choice ties them all), and so is a response without any word character
  (``empty_is_unanswered: false`` embeds it, as released, in the strict reading too).

Ties are decided with one stated tolerance, the same for the stand-in and the real embedder
(:func:`nearest`, :data:`TIE_RTOL`): two similarities tie when they differ by at most 1e-9 of the larger
magnitude, computed in float64 (NV-Embed-v2's float32 vectors widened first). Equal similarities computed in a
different order can differ in the last bits ("Not No vocals, but Female vocals" is 0.75 to both "No vocals" and
"Female vocals", and the stand-in's sums gave 0.75 and 0.75 + 1.1e-16): an exact ``==`` would take the last bit
for a preference, neither the released first-on-a-tie nor the strict "unanswered".
"""

from __future__ import annotations

import os
import re
from typing import Callable, Literal, Sequence

import numpy as np

from evalcore.core.embedders import KINDS, EmbedderSpec, bag_of_words, load, spec_of
from evalcore.judges.base import JUDGES, Judgment, PublishedRule
from evalcore.judges.parser import ParserJudge, named
from evalcore.core.packages import METRICS_EXTRA, MODELS_EXTRA, missing

__all__ = ["TIE_RTOL", "nearest", "nearest_choice", "first_nearest", "McqMmauProJudge", "RULE"]

Embed = Callable[[Sequence[str]], np.ndarray]  # texts → one L2-normalised row per text
#: two similarities tie when they differ by at most this share of the larger magnitude (float64)
TIE_RTOL = 1e-9

#: MMAU-Pro's published rule and where the strict reading departs from it
RULE = PublishedRule(
    source="github.com/sonalkum/MMAUPro evaluate_mmau_pro_comprehensive.py evaluate_closedended_with_nvembed "
           "@ 960e93a4",
    quirks="the first choice on a tie or the nearest choice of a wordless response",
    strict="a tie for the highest similarity, or a response without any word character, is unanswered")


def nearest(response: np.ndarray, choices: np.ndarray) -> np.ndarray:
    """Indices of the choice rows whose dot product with ``response`` ties for the highest, ascending: equal to
    the highest within :data:`TIE_RTOL` of the larger magnitude, in float64."""
    sims = np.asarray(choices, dtype=np.float64) @ np.asarray(response, dtype=np.float64)
    top = sims.max()
    return np.flatnonzero(top - sims <= TIE_RTOL * np.maximum(np.abs(sims), abs(top)))


def nearest_choice(response: np.ndarray, choices: np.ndarray) -> int:
    """The strict reading: index of the choice row nearest ``response``; -1 on a tie for the highest."""
    best = nearest(response, choices)
    return int(best[0]) if len(best) == 1 else -1


def first_nearest(response: np.ndarray, choices: np.ndarray) -> int:
    """The released reading: index of the choice row nearest ``response``, the first on a tie (``argmax``)."""
    return int(nearest(response, choices)[0])


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


class _Configured:
    """A configured embedder (:mod:`evalcore.core.embedders`) as the released rule uses one: each row L2-normalised."""

    def __init__(self, spec: EmbedderSpec) -> None:
        self.embedder = load(spec)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        emb = np.asarray(self.embedder.encode(texts), dtype=np.float64)
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        return np.divide(emb, norms, out=np.zeros_like(emb), where=norms > 0)


@JUDGES.register("mcq_mmau_pro")
class McqMmauProJudge(ParserJudge):
    """MCQ judge: the nearest choice by embedding similarity (module docstring)."""


    rule = RULE

    def __init__(self, embedder: Literal["nv-embed-v2", "bag-of-words"] = "nv-embed-v2",
                 model: str = "nvidia/NV-Embed-v2", device: str | None = None,
                 empty_is_unanswered: bool = True, similarity: EmbedderSpec | None = None) -> None:
        self.check_params({"embedder": embedder, "similarity": similarity})
        spec = spec_of(similarity)
        self.embedder, self.model, self.device, self.similarity = embedder, model, device, spec
        self.empty_is_unanswered = empty_is_unanswered
        # 2: the published verdict (credited) beside the strict one; then the embedder that decided
        self.version = f"2-{embedder}" if spec is None else f"2-{spec.kind}:{os.path.basename(spec.path.rstrip('/'))}"
        self._embed: Embed | None = bag_of_words if embedder == "bag-of-words" and spec is None else None

    @staticmethod
    def check_params(params: dict) -> None:
        """``similarity`` takes the place of ``embedder``: both set is a mistake (the config says so at once)."""
        if params.get("similarity") is not None and params.get("embedder", "nv-embed-v2") != "nv-embed-v2":
            raise ValueError(f"params.similarity: give either embedder ({params['embedder']!r}) or similarity, not "
                             "both")

    @staticmethod
    def packages_problem(params: dict) -> str | None:
        """What the configured embedder needs that does not import here, and the command that installs it (checked
        by ``evalcore validate`` before anything runs), else None: NV-Embed-v2 torch and transformers, a configured
        ``similarity`` its kind's modules, the stand-in nothing."""
        spec = params.get("similarity")
        if spec is not None:
            kind = spec.get("kind") if isinstance(spec, dict) else getattr(spec, "kind", None)
            needs, hint = KINDS.get(str(kind), ()), METRICS_EXTRA
        elif params.get("embedder", "nv-embed-v2") == "nv-embed-v2":
            needs, hint = ("torch", "transformers"), MODELS_EXTRA
        else:
            return None
        gone = missing(needs)
        return f"needs {', '.join(gone)}, which do not import here; install: {hint}" if gone else None

    @staticmethod
    def stand_in(params: dict) -> str | None:
        """What stands in for the published scorer's NV-Embed-v2 with ``params`` (the model card says so), else
        None."""
        if params.get("similarity") is None and params.get("embedder") == "bag-of-words":
            return "bag-of-words stand-in for NV-Embed-v2 (not the published scorer's embedder)"
        return None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self._embed is None:
            self._embed = _NVEmbed(self.model, self.device) if self.similarity is None else _Configured(self.similarity)
        return self._embed(texts)

    def _vectors(self, text: str, options: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The response's embedding and its choices' (the stand-in: one vocabulary for all of them)."""
        if self.embedder == "bag-of-words":
            vecs = self.embed([text, *options])
            return vecs[0], vecs[1:]
        return self.embed([text])[0], self.embed(options)

    def read(self, text: str, options: Sequence[str]) -> Judgment:
        """Both verdicts of one response from one embedding (module docstring)."""
        best = nearest(*self._vectors(text, options))
        wordless = not re.search(r"\w", text)
        strict = -1 if len(best) > 1 or (wordless and self.empty_is_unanswered) else int(best[0])
        return {"parsed_index": strict, "credited": named(int(best[0]))}

    def parse(self, text: str, options: Sequence[str]) -> int:  # type: ignore[override]
        """The strict reading's index for one response (-1 = unanswered)."""
        parsed = self.read(text, options)["parsed_index"]
        return -1 if parsed is None else int(parsed)
