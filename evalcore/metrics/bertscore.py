"""BERTScore through the ``bert_score`` library on a configured local model (no hub access).

Profiles: ``mullama`` = recall with no idf and no rescaling (the MU-LLaMA script: roberta-large,
layer 17); ``standard`` = F1, rescaled with bert_score's baseline when a baseline file exists for the
model (``baseline_path``, else the file bert_score ships for ``model_id``), raw F1 otherwise, as the
definition says. Distinct (reference, candidate) pairs are scored with one ``BERTScorer`` (model loaded
once) in calls of ``chunk_pairs`` pairs; inside a call bert_score embeds each distinct sentence once.
Values equal ``bert_score.score`` called on the same chunk of pairs with the same options.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any, Sequence

PUBLISHED = ("roberta-large", 17)  # bert_score's English default = the MU-LLaMA script's model


@dataclass(frozen=True)
class BertScoreConfig:
    """A local HF model directory and the layer whose embeddings are matched."""

    model: str
    num_layers: int | None = None  # None: bert_score's tuned layer for model_id (17 for roberta-large)
    model_id: str | None = None  # published name, e.g. "roberta-large" (default: the directory's name)
    batch_size: int = 64
    device: str = "cpu"
    baseline_path: str | None = None
    chunk_pairs: int = 2048  # bounds memory: bert_score keeps every distinct sentence's embeddings per call
    lang: str = "en"

    @property
    def name(self) -> str:
        return self.model_id or os.path.basename(os.path.normpath(self.model))

    def layers(self) -> int:
        if self.num_layers is not None:
            return self.num_layers
        from bert_score.utils import model2layers

        if self.name not in model2layers:
            raise ValueError(f"BERTScore: no default layer for {self.name!r}; give num_layers")
        return model2layers[self.name]

    def baseline(self) -> str | None:
        """The rescaling baseline file for this model, if one exists."""
        if self.baseline_path:
            return self.baseline_path if os.path.isfile(self.baseline_path) else None
        import bert_score

        path = os.path.join(os.path.dirname(bert_score.__file__), "rescale_baseline", self.lang, f"{self.name}.tsv")
        return path if os.path.isfile(path) else None

    def is_published(self) -> bool:
        return (self.name, self.layers()) == PUBLISHED


def check_model(cfg: BertScoreConfig) -> None:
    """Fail early, naming the fix, when the model directory is not a local HF model."""
    if not os.path.isfile(os.path.join(cfg.model, "config.json")):
        raise FileNotFoundError(f"BERTScore model {cfg.model!r} is not a local model directory with config.json "
                                "(models are never downloaded: point it at a local copy, e.g. of roberta-large)")


def model_info(cfg: BertScoreConfig) -> dict[str, Any]:
    """What the model directory says it is (type, depth, width), for the output tables."""
    with open(os.path.join(cfg.model, "config.json"), encoding="utf-8") as fh:
        conf = json.load(fh)
    return {k: conf.get(k) for k in ("model_type", "num_hidden_layers", "hidden_size", "_name_or_path")}


def definition(cfg: BertScoreConfig, profile: str) -> str:
    what = "recall" if profile == "mullama" else "F1"
    layers = cfg.layers()
    if profile == "mullama":
        scale = "no baseline rescaling"
    else:
        base = cfg.baseline()
        scale = f"rescaled with baseline {os.path.basename(base)}" if base else f"NOT rescaled (no baseline file for {cfg.name})"
    label = (f"model {cfg.name}" if cfg.is_published()
             else f"model {cfg.name} -- NOT the published roberta-large layer 17")
    return (f"bert-score {version('bert-score')} {what}, {label} (path {cfg.model}), layer {layers}, idf off, "
            f"{scale}, batch {cfg.batch_size}, transformers {version('transformers')}")


class BertScore:
    """One loaded ``bert_score.BERTScorer``; ``score`` returns one float per (reference, candidate) pair."""

    def __init__(self, cfg: BertScoreConfig, profile: str) -> None:
        from bert_score import BERTScorer

        check_model(cfg)
        self.cfg, self.profile = cfg, profile
        base = cfg.baseline() if profile == "standard" else None
        self.rescale = base is not None
        self.scorer = BERTScorer(model_type=cfg.model, num_layers=cfg.layers(), idf=False, device=cfg.device,
                                 batch_size=cfg.batch_size, lang=cfg.lang, rescale_with_baseline=self.rescale,
                                 baseline_path=base)

    def score(self, refs: Sequence[str], cands: Sequence[str]) -> list[float]:
        """Values for the pairs, each distinct pair scored once, in calls of ``chunk_pairs`` distinct pairs."""
        pairs = list(dict.fromkeys(zip(refs, cands)))
        got: dict[tuple[str, str], float] = {}
        step = max(1, self.cfg.chunk_pairs)
        for i in range(0, len(pairs), step):
            chunk = pairs[i:i + step]
            p, r, f = self.scorer.score([c for _, c in chunk], [ref for ref, _ in chunk],
                                        batch_size=self.cfg.batch_size)
            vals = r if self.profile == "mullama" else f
            got.update(zip(chunk, (float(v) for v in vals.tolist())))
        return [got[p] for p in zip(refs, cands)]
