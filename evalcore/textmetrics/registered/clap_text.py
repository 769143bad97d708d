"""CLAPText: cosine similarity of the CLAP text embeddings of candidate and reference.

The embedding is what laion_clap's ``CLAP_Module(enable_fusion=False, amodel='HTSAT-base')
.get_text_embedding`` computes (the paper uses ``music_audioset_epoch_15_esc_90.14.pt``):
roberta tokens (``padding="max_length"``, ``truncation=True``, ``max_length=77``) → ``RobertaModel``
pooler output → ``text_projection`` (Linear → ReLU → Linear) → L2 normalisation. It is rebuilt here
with transformers from the ``text_branch.*`` / ``text_projection.*`` weights of the laion checkpoint
(``module.``-prefixed or not, bare or under ``state_dict``); the roberta architecture is read off the
weight shapes (heads = hidden / 64, roberta-base's constants otherwise). Checkpoint and tokenizer come
from configured paths, local or ``s3://`` (copied to a local cache first); nothing is fetched from a hub.

``ClapTextEmbedder`` embeds texts in-process; :func:`embed_texts` embeds each distinct text once,
in-process or on Ray actors (``ray.remote(ClapTextEmbedder)``) for many rows.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from importlib.metadata import version
from typing import Any, ClassVar, Hashable, Sequence

import numpy as np
import pyarrow.fs as pafs
from pydantic import Field

from evalcore.core import cluster, storage
from evalcore.textmetrics.freeform_metric import (METRICS, FreeformMetric, MetricParams, Scored, guarded, scoreable,
                                              spread)

CONTEXT_LENGTH = 77
_TEXT_PREFIXES = ("text_branch.", "text_projection.")
_BUFFERS = ("text_branch.embeddings.position_ids", "text_branch.embeddings.token_type_ids")
PAPER_CHECKPOINT = "music_audioset_epoch_15_esc_90.14.pt"


class ClapTextConfig(MetricParams):
    """CLAPText's settings, as a protocol's ``metrics.clap`` config and as the embedder takes them: where the laion
    checkpoint and the roberta tokenizer files (vocab.json, merges.txt) are, local or s3://."""

    path_params: ClassVar[dict[str, str]] = {"checkpoint": "file", "tokenizer": "dir"}  # files a metric actor reads, on whichever node it runs

    checkpoint: str = Field(min_length=1, description="laion CLAP checkpoint (.pt), local or s3:// (paper: "
                                                      f"{PAPER_CHECKPOINT}).")
    tokenizer: str = Field(min_length=1, description="Directory with roberta-base's vocab.json and merges.txt, "
                                                     "local or s3://.")
    device: str = Field("cpu", description="torch device the model runs on.")
    batch_size: int = Field(32, ge=1)
    num_attention_heads: int | None = Field(None, ge=1)  # None: hidden size / 64 (roberta's convention)
    cache_dir: str | None = None  # local copies of s3:// inputs (default: a temp dir)
    weights_only: bool = True  # torch.load(weights_only=...); False only for a trusted pickle
    #: evalcore.core.storage.S3Options fields, for Ray workers reading s3:// (the run's, set when the metric is built)
    s3: dict | None = Field(None, exclude=True)
    #: Ray actors embedding the texts in the run's scorer (0 = in the scorer's process)
    actors: int = Field(0, ge=0)

    def label(self) -> str:
        name = os.path.basename(self.checkpoint.rstrip("/"))
        note = "" if name == PAPER_CHECKPOINT else f" (NOT the paper's {PAPER_CHECKPOINT})"
        return f"{name}{note}"


def _cache_root(cfg: ClapTextConfig) -> str:
    return cfg.cache_dir or os.path.join(tempfile.gettempdir(), "evalcore-clap-cache")


def localize(uri: str, cache_dir: str) -> str:
    """A local path for ``uri``: itself when local, else a copy of the s3 object (or prefix) under ``cache_dir``."""
    if not storage.is_s3(uri):
        return storage.resolve(uri)[1]
    fs, path = storage.resolve(uri)
    base = os.path.join(cache_dir, hashlib.sha256(uri.encode()).hexdigest()[:16])
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"{uri}: no such object or prefix")
    files = ([info] if info.type == pafs.FileType.File
             else [i for i in fs.get_file_info(pafs.FileSelector(path, recursive=True)) if i.type == pafs.FileType.File])
    for f in files:
        rel = os.path.basename(f.path) if info.type == pafs.FileType.File else os.path.relpath(f.path, path)
        dest = os.path.join(base, rel)
        if os.path.isfile(dest) and os.path.getsize(dest) == f.size:
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        tmp = f"{dest}.part-{os.getpid()}"
        with fs.open_input_stream(f.path) as src, open(tmp, "wb") as out:
            while chunk := src.read(1 << 24):
                out.write(chunk)
        os.replace(tmp, dest)
    return os.path.join(base, os.path.basename(path)) if info.type == pafs.FileType.File else base


def text_state_dict(checkpoint: dict) -> dict:
    """The text-branch tensors of a laion checkpoint, with ``module.`` stripped and legacy buffers dropped."""
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or not state:
        raise ValueError("not a laion CLAP checkpoint: no state dict")
    out = {}
    for key, value in state.items():
        key = key[len("module."):] if key.startswith("module.") else key
        if key.startswith(_TEXT_PREFIXES) and key not in _BUFFERS:
            out[key] = value
    if "text_branch.embeddings.word_embeddings.weight" not in out or "text_projection.0.weight" not in out:
        raise ValueError("not a laion CLAP checkpoint with a roberta text branch: no text_branch/text_projection weights")
    return out


def roberta_config(state: dict, num_attention_heads: int | None = None) -> Any:
    """roberta-base's config with sizes read off the weights (vocab, width, depth, FFN, positions)."""
    from transformers import RobertaConfig

    hidden = state["text_branch.embeddings.word_embeddings.weight"].shape[1]
    layers = {int(k.split(".")[3]) for k in state if k.startswith("text_branch.encoder.layer.")}
    return RobertaConfig(
        vocab_size=state["text_branch.embeddings.word_embeddings.weight"].shape[0],
        hidden_size=hidden,
        num_hidden_layers=len(layers),
        num_attention_heads=num_attention_heads or hidden // 64,
        intermediate_size=state["text_branch.encoder.layer.0.intermediate.dense.weight"].shape[0],
        max_position_embeddings=state["text_branch.embeddings.position_embeddings.weight"].shape[0],
        type_vocab_size=state["text_branch.embeddings.token_type_embeddings.weight"].shape[0],
        hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )


def _encoder_class() -> type:
    import torch
    from torch import nn
    from transformers import RobertaModel

    class ClapTextEncoder(nn.Module):
        """laion's text path: roberta pooler → text_projection MLP → L2 normalisation."""

        def __init__(self, config: Any, proj_in: int, proj_hidden: int, proj_out: int) -> None:
            super().__init__()
            self.text_branch = RobertaModel(config, add_pooling_layer=True)
            self.text_projection = nn.Sequential(nn.Linear(proj_in, proj_hidden), nn.ReLU(),
                                                 nn.Linear(proj_hidden, proj_out))

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            pooled = self.text_branch(input_ids=input_ids, attention_mask=attention_mask)["pooler_output"]
            return nn.functional.normalize(self.text_projection(pooled), dim=-1)

    return ClapTextEncoder


def load_encoder(path: str, num_attention_heads: int | None = None, weights_only: bool = True) -> Any:
    """The text encoder with the checkpoint's weights (every parameter must be present)."""
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=weights_only, mmap=True)
    except RuntimeError:  # legacy (non-zip) serialisation cannot be memory-mapped
        ckpt = torch.load(path, map_location="cpu", weights_only=weights_only)
    state = text_state_dict(ckpt)
    del ckpt
    w0, w2 = state["text_projection.0.weight"], state["text_projection.2.weight"]
    model = _encoder_class()(roberta_config(state, num_attention_heads), w0.shape[1], w0.shape[0], w2.shape[0])
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}: text-branch weights do not fit roberta + projection "
                         f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    return model.eval()


class ClapTextEmbedder:
    """Tokenizer + encoder in one process; ``embed`` returns L2-normalised float32 rows."""

    @storage.scoped(lambda self, cfg: storage.StorageSettings.of(cfg.s3 or None))  # s3:// model files: the run's S3
    def __init__(self, cfg: ClapTextConfig) -> None:
        import torch
        from transformers import RobertaTokenizer

        self.cfg = cfg
        self.tokenizer = RobertaTokenizer.from_pretrained(localize(cfg.tokenizer, _cache_root(cfg)), local_files_only=True)
        self.model = load_encoder(localize(cfg.checkpoint, _cache_root(cfg)), cfg.num_attention_heads,
                                  cfg.weights_only).to(cfg.device)
        self._torch = torch
        self.n_embedded = 0
        self.memo: dict[str, np.ndarray] = {}  # text → embedding, for :meth:`embed_distinct`

    def tokenize(self, texts: Sequence[str]) -> dict:
        return self.tokenizer(list(texts), padding="max_length", truncation=True, max_length=CONTEXT_LENGTH,
                              return_tensors="pt")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 unit vectors, in batches of ``cfg.batch_size``."""
        out = []
        with self._torch.inference_mode():
            for i in range(0, len(texts), self.cfg.batch_size):
                tok = self.tokenize(texts[i:i + self.cfg.batch_size])
                emb = self.model(tok["input_ids"].to(self.cfg.device), tok["attention_mask"].to(self.cfg.device))
                out.append(emb.float().cpu().numpy())
        self.n_embedded += len(texts)
        dim = self.model.text_projection[2].out_features
        return np.concatenate(out) if out else np.zeros((0, dim), dtype=np.float32)

    def embed_distinct(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """{text: embedding} for each distinct text; a text this embedder embedded before comes from its memo
        (:data:`MEMO_TEXTS` at most: references recur across conditions and models, answers across items)."""
        distinct = list(dict.fromkeys(texts))
        new = [t for t in distinct if t not in self.memo]
        if len(self.memo) + len(new) > MEMO_TEXTS:
            self.memo.clear()
            new = distinct
        if new:
            self.memo.update(zip(new, self.embed(new)))
        return {t: self.memo[t] for t in distinct}

    def count(self) -> int:
        """Texts embedded so far by this embedder (each call's texts counted once)."""
        return self.n_embedded


#: texts whose embeddings one embedder keeps (about 100 MB at 512 dimensions)
MEMO_TEXTS = 50_000


def embed_texts(texts: Sequence[str], cfg: ClapTextConfig, *, ray_actors: int = 0, actor_cpus: float = 1.0,
                embedder: ClapTextEmbedder | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """{text: embedding} for each distinct text, embedded once; on ``ray_actors`` Ray actors when > 0."""
    distinct = list(dict.fromkeys(texts))
    stats: dict[str, Any] = {"texts": len(texts), "distinct": len(distinct), "ray_actors": ray_actors}
    if not distinct:
        return {}, stats
    if ray_actors <= 0:
        return (embedder or ClapTextEmbedder(cfg)).embed_distinct(distinct), stats
    import ray

    cluster.start(None, log_to_driver=False, configure_logging=False)  # $RAY_ADDRESS, else a local cluster
    actor_cls = ray.remote(num_cpus=actor_cpus)(ClapTextEmbedder)
    actors = [actor_cls.remote(cfg) for _ in range(min(ray_actors, len(distinct)))]
    size = max(cfg.batch_size, -(-len(distinct) // (len(actors) * 4)))
    chunks = [distinct[i:i + size] for i in range(0, len(distinct), size)]
    refs = [actors[k % len(actors)].embed.remote(c) for k, c in enumerate(chunks)]
    emb = np.concatenate(ray.get(refs))
    stats["embedded_by_actors"] = int(sum(ray.get([a.count.remote() for a in actors])))
    for a in actors:
        ray.kill(a)
    return dict(zip(distinct, emb)), stats


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity in float64 of two float32 embeddings."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


def definition(cfg: ClapTextConfig) -> str:
    return (f"cosine of CLAP text embeddings (laion_clap get_text_embedding, HTSAT-base, no fusion: roberta "
            f"tokens max_length {CONTEXT_LENGTH}, pooler -> text_projection -> L2) re-implemented on transformers "
            f"{version('transformers')}, torch {version('torch')}; checkpoint {cfg.label()}")


def describe(cfg: ClapTextConfig) -> dict[str, Any]:
    """Provenance for the output tables (paths, not credentials)."""
    d = cfg.model_dump(exclude={"s3", "actors"})
    return {**d, "checkpoint_name": cfg.label(), "context_length": CONTEXT_LENGTH}


@METRICS.register("claptext")
class ClapText(FreeformMetric):
    """CLAPText per pair (settings: :class:`ClapTextConfig` under ``clap``); scored in the stream's metric actors,
    on ``device``, and by the run's scorer on ``clap.actors`` Ray actors when > 0."""

    Params = ClapTextConfig
    section = "clap"
    settings_hint = "clap.checkpoint and clap.tokenizer are not set"
    requires = ("torch", "transformers")
    libraries = ("torch", "transformers")
    stream = "model"
    value_fields = ("checkpoint", "tokenizer")

    def _cfg(self) -> ClapTextConfig:
        if self.params is None:
            raise ValueError("claptext needs a ClapTextConfig (laion checkpoint and tokenizer paths)")
        return self.params.model_copy(update={"s3": self.s3}) if self.s3 else self.params  # type: ignore[return-value]

    def definition(self) -> str:
        return definition(self._cfg())

    def run_definition(self) -> str:
        cfg = self._cfg()
        return (f"{definition(cfg)} (checkpoint path {cfg.checkpoint}, tokenizer {cfg.tokenizer}; "
                f"Ray actors: {self.ray_actors()})")

    def device(self) -> str | None:
        return self._cfg().device

    def ray_actors(self) -> int:
        return self._cfg().actors if self.ray else 0

    def problems(self) -> list[tuple[str, str]]:
        cfg = self._cfg()
        return [(f"clap.{name}", f"{uri!r} does not exist") for name in ("checkpoint", "tokenizer")
                if not storage.is_s3(uri := getattr(cfg, name)) and not os.path.exists(uri)]

    def score(self, references: Sequence[Any], candidates: Sequence[Any], checks: Sequence[str | None],
              corpora: Sequence[Hashable] | None, loaded: dict) -> Scored:
        cfg, actors = self._cfg(), self.ray_actors()
        embedder = loaded.get("claptext")
        if embedder is None and actors <= 0:
            embedder = loaded["claptext"] = ClapTextEmbedder(cfg)
        rows = scoreable(checks)
        stats: dict[str, Any] = {}

        def run() -> list[float]:
            texts = [references[i] for i in rows] + [candidates[i] for i in rows]
            emb, st = embed_texts(texts, cfg, ray_actors=actors, embedder=embedder)
            stats.update(st)
            return [cosine(emb[candidates[i]], emb[references[i]]) for i in rows]

        vals, errs = guarded(self.name, len(rows), run)
        values, errors = spread(checks, rows, vals, errs)
        return values, errors, {"definition": definition(cfg), **describe(cfg), "embedding": stats}
