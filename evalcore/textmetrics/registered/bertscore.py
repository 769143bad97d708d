"""BERTScore through the ``bert_score`` library on a configured local model (no hub access).

Profiles: ``mullama`` = recall with no idf and no rescaling (the MU-LLaMA script: roberta-large,
layer 17); ``standard`` = F1, rescaled with bert_score's baseline when a baseline file exists for the
model (``baseline``, else the file bert_score ships for ``model_id``), raw F1 otherwise, as the
definition says. Distinct (reference, candidate) pairs are scored with one ``BERTScorer`` (model loaded
once) in calls of ``chunk_pairs`` pairs; inside a call bert_score embeds each distinct sentence once.
Values equal ``bert_score.score`` called on the same chunk of pairs with the same options.
"""

from __future__ import annotations

import json
import os
from importlib.metadata import version
from typing import Any, ClassVar, Hashable, Sequence

from pydantic import Field

from evalcore.core.packages import importable
from evalcore.textmetrics.freeform_metric import (METRICS, FreeformMetric, MetricParams, Scored, guarded, scoreable,
                                              spread)

PUBLISHED = ("roberta-large", 17)  # bert_score's English default = the MU-LLaMA script's model


class BertScoreConfig(MetricParams):
    """BERTScore's settings, as a protocol's ``metrics.bertscore`` config and as the library takes them: a local
    HF model directory (never downloaded) and the layer whose embeddings are matched."""

    path_params: ClassVar[dict[str, str]] = {"model": "dir", "baseline": "file"}  # files a metric actor reads, on whichever node it runs

    model: str = Field(min_length=1, description="Local model directory, never downloaded (mullama: a copy of "
                                                 "roberta-large).")
    model_id: str | None = Field(None, description="Published name of that model (default: the directory name), "
                                                   "e.g. roberta-large; picks bert_score's default layer.")
    num_layers: int | None = Field(None, ge=1, description="Layer (default: bert_score's tuned layer for the model "
                                                           "id, 17 for roberta-large).")
    batch_size: int = Field(64, ge=1, description="Sentence pairs BERTScore embeds at once.")
    device: str = Field("cpu", description="torch device the model runs on.")
    baseline: str | None = Field(None, description="Rescaling baseline .tsv (standard profile; default: "
                                                   "bert_score's file for the model id, if any).")
    chunk_pairs: int = Field(2048, ge=1)  # bounds memory: bert_score keeps every distinct sentence's embeddings per call
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

    def baseline_file(self) -> str | None:
        """The rescaling baseline file for this model, if one exists."""
        if self.baseline:
            return self.baseline if os.path.isfile(self.baseline) else None
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
        base = cfg.baseline_file()
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
        base = cfg.baseline_file() if profile == "standard" else None
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


@METRICS.register("bertscore")
class BertScoreMetric(FreeformMetric):
    """BERTScore per pair on the configured model (settings: :class:`BertScoreConfig` under ``bertscore``);
    scored in the stream's metric actors, on ``device``."""

    Params = BertScoreConfig
    section = "bertscore"
    settings_hint = "bertscore.model is not set (a local model directory, e.g. a copy of roberta-large)"
    requires = ("bert_score", "torch", "transformers")
    libraries = ("bert-score", "torch", "transformers")
    stream = "model"
    value_fields = ("model", "model_id", "num_layers", "baseline")

    @classmethod
    def check(cls, params: BertScoreConfig) -> None:
        """A model without a default layer needs ``num_layers`` (checked where bert_score imports; else the
        preflight names the missing package)."""
        if params.num_layers is None and importable("bert_score"):
            from bert_score.utils import model2layers

            if params.name not in model2layers:
                raise ValueError(f"bertscore.num_layers: no default layer for model {params.name!r}; set num_layers "
                                 "(or model_id to a published name)")

    def _cfg(self) -> BertScoreConfig:
        if self.params is None:
            raise ValueError("bertscore needs a BertScoreConfig (a local model directory)")
        return self.params  # type: ignore[return-value]

    def definition(self) -> str:
        return definition(self._cfg(), self.profile)

    def device(self) -> str | None:
        return self._cfg().device

    def problems(self) -> list[tuple[str, str]]:
        cfg = self._cfg()
        if not os.path.isfile(os.path.join(cfg.model, "config.json")):
            return [("bertscore.model", f"{cfg.model!r} is not a local model directory with config.json "
                                        "(models are never downloaded)")]
        return []

    def score(self, references: Sequence[Any], candidates: Sequence[Any], checks: Sequence[str | None],
              corpora: Sequence[Hashable] | None, loaded: dict) -> Scored:
        cfg = self._cfg()
        scorer = loaded.get(("bertscore", self.profile))
        if scorer is None:
            scorer = loaded[("bertscore", self.profile)] = BertScore(cfg, self.profile)
        rows = scoreable(checks)
        meta = {"definition": definition(cfg, self.profile), "path": cfg.model, "model_id": cfg.name,
                "num_layers": cfg.layers(), "rescaled": scorer.rescale, "config": model_info(cfg)}
        vals, errs = guarded(self.name, len(rows), lambda: scorer.score([references[i] for i in rows],
                                                                        [candidates[i] for i in rows]))
        values, errors = spread(checks, rows, vals, errs)
        return values, errors, meta
