"""Deterministic pieces of the CLAPText golden fixture, shared by ``make_clap_golden.py`` and the tests.

Pure numpy + stdlib so it runs both in the laion_clap venv and in evalcore's venv. The text-branch
weights are not committed: :func:`seeded_param` regenerates every parameter from its name and
shape with numpy's legacy ``RandomState`` (whose streams are frozen across numpy versions).
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

FIXTURE_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "clap"
SEED = 20240917

#: the random laion text branch: roberta-base's architecture (hidden 768, 12 heads, GELU,
#: layer-norm eps 1e-5, pad id 1, 514 positions, one token type) with 2 layers and a small vocab
TEXT_CONFIG = {
    "hidden_size": 768, "num_hidden_layers": 2, "num_attention_heads": 12, "intermediate_size": 3072,
    "hidden_act": "gelu", "layer_norm_eps": 1e-5, "max_position_embeddings": 514, "type_vocab_size": 1,
    "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
}
TOKENIZER_VOCAB = 1000
SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # roberta's ids 0..3 (pad = 1)

#: texts embedded for the goldens: short, long (> 77 tokens), punctuation, unicode, blank
TEXTS = [
    "A calm piano piece.",
    "The song features electric guitar, drums and a deep bass line; tempo ~120 BPM!",
    "Is this (maybe) jazz? -- \"Yes\", it's jazz: swing & brushes... 100%",
    "Café naïve Motörhead — 東京のジャズ ♪ 🎸🥁 ñ Ωmega",
    "  leading and trailing spaces, double  spaces\tand a tab  ",
    " ".join(["The track is a blend of post-rock and electronic experimental sounds with synthesizers,"
              " guitars and samples, raw and atmospheric, building slowly over several minutes."] * 4),
    "",
    "bass",
]


def seeded_param(name: str, shape: tuple[int, ...], seed: int = SEED) -> np.ndarray:
    """float32 values for parameter ``name`` of ``shape``: LayerNorm weights near 1, biases small."""
    rs = np.random.RandomState([seed & 0xFFFFFFFF, zlib.crc32(name.encode("utf-8"))])
    z = rs.standard_normal(size=shape)
    if name.endswith("LayerNorm.weight"):
        return (1.0 + 0.1 * z).astype(np.float32)
    if name.endswith("bias"):
        return (0.02 * z).astype(np.float32)
    return (0.05 * z).astype(np.float32)


def seeded_weights(shapes: dict[str, list[int]], seed: int = SEED) -> dict[str, np.ndarray]:
    """Every parameter named in ``shapes`` (laion's ``text_branch.*`` / ``text_projection.*`` names)."""
    return {name: seeded_param(name, tuple(shape), seed) for name, shape in shapes.items()}


def checksum(weights: dict[str, np.ndarray]) -> float:
    """A float64 fingerprint of generated weights (catches a non-reproducible generator early)."""
    return float(sum(np.float64(w.astype(np.float64).sum()) * (i + 1) for i, (_, w) in enumerate(sorted(weights.items()))))


def parameter_shapes() -> dict[str, list[int]]:
    """laion's text-branch parameter names and shapes, as recorded by ``make_clap_golden.py``."""
    import json

    return json.loads((FIXTURE_DIR / "text_branch.json").read_text())["parameters"]


def write_laion_checkpoint(path: Path | str, seed: int = SEED) -> float:
    """Write the seeded text branch as a laion-format checkpoint (``state_dict`` of ``module.``-prefixed
    keys, plus keys a real one also holds: an audio-branch tensor, logit scales, the legacy
    ``position_ids`` buffer, ``text_transform``, ``epoch``); returns the weights' checksum."""
    import torch

    weights = seeded_weights(parameter_shapes(), seed)
    state = {f"module.{k}": torch.from_numpy(v) for k, v in weights.items()}
    state["module.text_branch.embeddings.position_ids"] = torch.arange(514).unsqueeze(0)
    state["module.audio_branch.patch_embed.proj.weight"] = torch.zeros(4, 1, 2, 2)
    state["module.logit_scale_a"] = torch.tensor(2.65)
    state["module.text_transform.sequential.0.weight"] = torch.zeros(512, 512)
    torch.save({"epoch": 15, "state_dict": state}, str(path))
    return checksum(weights)
