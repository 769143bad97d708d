"""Text embedders by config, for the rules that score a response by its similarity to label or choice texts: the
CMI-Bench tagging rules (released: GTE-Qwen2-7B-instruct through sentence-transformers) and MMAU-Pro's judge
(released: NV-Embed-v2). A config names one with ``{kind, path}`` (:class:`EmbedderSpec`):

* ``sentence_transformers`` — a sentence-transformers model folder, loaded as the released tagging scorer loads GTE
  (``SentenceTransformer(path)``, the model's own pooling and normalisation); a response is encoded with the model's
  ``query`` prompt (``query_prompt``, as released: ``encode([response], prompt_name="query")``), labels with none;
* ``transformers_mean`` — a transformers model folder (``AutoModel``, ``AutoTokenizer``): the mean of the last hidden
  states over the attention mask, L2-normalised (for a checkpoint without a sentence-transformers config).

Both read a local folder only (no hub fetch: ``local_files_only``), on ``device`` (default: cuda when there is
one), each loaded once per process (:func:`load`: the scoring tasks and the judge's actors reuse it). Where nothing is
configured the callers keep their weight-free ``bag-of-words`` stand-in, named as such in every definition.
:attr:`Embedder.name` names the library and its version, the folder and a hash of its config, for the definitions.
What a kind needs to import (:func:`requires`) is checked by ``evalcore validate`` like any component's packages, and
the folder by :func:`path_problem`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections import Counter
from typing import Any, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = ["KINDS", "EmbedderSpec", "Embedder", "load", "describe", "requires", "path_problem", "spec_of",
           "bag_of_words"]

_WORD = re.compile(r"\b\w+\b")

#: what each real kind loads with
KINDS = {"sentence_transformers": ("sentence_transformers", "torch", "transformers"),
         "transformers_mean": ("torch", "transformers")}


class EmbedderSpec(BaseModel):
    """A configured text embedder (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["sentence_transformers", "transformers_mean"]
    #: a local model folder
    path: str = Field(min_length=1)
    #: torch's device name; None: cuda when there is one, else cpu
    device: str | None = None
    #: sentence_transformers: the prompt name a response is encoded with (the released scorer's ``query``; None: no
    #: prompt); the folder's config must define it
    query_prompt: str | None = "query"


def spec_of(value: Any) -> EmbedderSpec | None:
    """``value`` (a config's dict, a spec or None) as a spec; raises pydantic's ``ValidationError`` on a bad one."""
    return value if value is None or isinstance(value, EmbedderSpec) else EmbedderSpec.model_validate(value)


def requires(spec: EmbedderSpec | None) -> tuple[str, ...]:
    """The modules ``spec``'s kind imports (none for the stand-in)."""
    return KINDS[spec.kind] if spec is not None else ()


def _local(path: str) -> str:
    return os.path.expanduser(path.removeprefix("file://"))


def path_problem(spec: EmbedderSpec) -> str | None:
    """Why ``spec``'s folder cannot be loaded as its kind (one line), or None; reads only small config files."""
    folder = _local(spec.path)
    if not os.path.isdir(folder):
        return f"{spec.path!r} is not a local folder (a model folder on this machine: nothing is downloaded)"
    need = "modules.json" if spec.kind == "sentence_transformers" else "config.json"
    if not os.path.isfile(os.path.join(folder, need)):
        return f"{spec.path!r} holds no {need}: not a {spec.kind} model folder"
    if spec.kind == "sentence_transformers" and spec.query_prompt is not None:
        prompts = _json(os.path.join(folder, "config_sentence_transformers.json")).get("prompts") or {}
        if spec.query_prompt not in prompts:
            return (f"{spec.path!r} defines no prompt {spec.query_prompt!r} (its prompts: {sorted(prompts) or 'none'});"
                    " set query_prompt to one of them, or null for none")
    return None


def _json(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def describe(spec: EmbedderSpec) -> str:
    """What a definition says of ``spec`` (nothing loaded or imported): the library and its version, the folder's
    name and config hash, how a text becomes a vector."""
    from importlib.metadata import PackageNotFoundError, version

    folder = _local(spec.path)
    lib = "sentence-transformers" if spec.kind == "sentence_transformers" else "transformers"
    try:
        lib += f" {version(lib)}"
    except PackageNotFoundError:
        lib += " (not installed)"
    if spec.kind == "sentence_transformers":
        prompt = f", a response encoded with its prompt {spec.query_prompt!r}" if spec.query_prompt else ""
        return f"{lib}: {_identity(folder)}, the model's own pooling{prompt}"
    return f"{lib}: {_identity(folder)}, mean of the last hidden states over the attention mask, L2-normalised"


def _identity(folder: str) -> str:
    """The folder's name and the first 12 hex digits of its config.json's sha256."""
    try:
        with open(os.path.join(folder, "config.json"), "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
    except OSError:
        digest = "no config.json"
    return f"{os.path.basename(os.path.normpath(folder))} (config sha256 {digest})"


class Embedder:
    """A loaded embedder: :meth:`encode` rows of texts (as the model gives them), :meth:`similarity` a response
    against labels as the released tagging scorer computes it, :attr:`name` for the definitions."""

    def __init__(self, spec: EmbedderSpec) -> None:
        import torch  # heavy: torch and the model

        self.spec, self.torch, self.name = spec, torch, describe(spec)
        folder = _local(spec.path)
        self.device = spec.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if spec.kind == "sentence_transformers":
            from sentence_transformers import SentenceTransformer

            self.model = SentenceTransformer(folder, device=self.device, local_files_only=True)
        else:
            from transformers import AutoModel, AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
            self.model = AutoModel.from_pretrained(folder, local_files_only=True).to(self.device).eval()

    def encode(self, texts: Sequence[str], query: bool = False) -> np.ndarray:
        """One row per text, float32 (``query``: a response, with the query prompt where the kind has one)."""
        if self.spec.kind == "sentence_transformers":
            prompt = self.spec.query_prompt if query else None
            return np.asarray(self.model.encode(list(texts), prompt_name=prompt, show_progress_bar=False,
                                                convert_to_numpy=True))
        with self.torch.no_grad():
            batch = self.tokenizer(list(texts), padding=True, truncation=True, return_tensors="pt").to(self.device)
            hidden = self.model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return self.torch.nn.functional.normalize(mean, p=2, dim=1).float().cpu().numpy()

    def similarity(self, response: str, labels: Sequence[str]) -> np.ndarray:
        """The released tagging scorer's scores: ``encode([response], query) @ encode(labels).T × 100``."""
        return (self.encode([response], query=True) @ self.encode(labels).T)[0] * 100


@functools.lru_cache(maxsize=4)
def load(spec: EmbedderSpec) -> Embedder:
    """``spec``'s embedder, loaded once per process."""
    return Embedder(spec)


def bag_of_words(texts: Sequence[str]) -> np.ndarray:
    """The stand-in embedder (MMAU-Pro's judge and CMI-Bench's tagging rule without a real one): L2-normalised word
    counts over the words of ``texts`` (a zero row for no words)."""
    counts = [Counter(_WORD.findall(t.lower())) for t in texts]
    vocab = sorted({w for c in counts for w in c})
    index = {w: i for i, w in enumerate(vocab)}
    out = np.zeros((len(texts), max(len(vocab), 1)))
    for row, c in enumerate(counts):
        for w, n in c.items():
            out[row, index[w]] = n
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
