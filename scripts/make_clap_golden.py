"""Make the CLAPText golden embeddings with the real ``laion_clap`` code (run once, by hand).

What it writes to ``tests/fixtures/clap/`` (committed, well under 5 MB):

- ``tokenizer/vocab.json`` + ``tokenizer/merges.txt``: a small byte-level BPE (1,000 tokens, roberta's
  special tokens at roberta's ids) trained here on the MusicQA answers, so any text tokenizes;
- ``text_branch.json``: the roberta config of the random text branch and the names/shapes of every
  ``text_branch.*`` / ``text_projection.*`` parameter of laion's ``CLAP_Module`` (as laion names them);
- ``goldens.json``: ``TEXTS`` (``scripts/clap_fixture.py``), laion's token ids for them and
  ``CLAP_Module.get_text_embedding(TEXTS)`` (float32 → JSON floats), plus the versions used.

The weights are not committed: ``clap_fixture.seeded_weights`` regenerates them from names and
shapes; this script loads them into laion's model before embedding, and the test writes the same
values as a laion-format checkpoint and loads it through evalcore's own loading code.

laion-clap 1.1.7 pins numpy<2, imports torchvision (for its image datasets only) and, at import, fetches the roberta/bert/bart
tokenizers (and at model creation roberta-base's weights) from the hub; there is no network, so
those ``from_pretrained`` calls are patched here: roberta's tokenizer → the local BPE above,
``RobertaModel`` → a randomly initialised ``RobertaModel(TEXT_CONFIG)`` (overwritten by the seeded
weights), bert/bart tokenizers → ``None`` (unused by the roberta text path). PyPI's torchvision
wheels are CUDA builds that do not load on the CPU torch, so when ``import torchvision`` fails a stub
module stands in for it (laion's text path never touches torchvision).

Exact procedure (CPU, about 2 minutes)::

    python3 -m venv /tmp/clapvenv
    /tmp/clapvenv/bin/pip install /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl
    /tmp/clapvenv/bin/pip install "laion-clap==1.1.7" "numpy<2" "transformers>=4.40,<5"
    /tmp/clapvenv/bin/python scripts/make_clap_golden.py [--data ../shared/data/musicqa/EvalMusicQA.json]

(transformers < 5 on purpose: laion's side then uses the pure-Python ``RobertaTokenizer`` and the
4.x ``RobertaModel``, independent of the transformers 5 code evalcore runs.)
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clap_fixture import (FIXTURE_DIR, SEED, SPECIAL_TOKENS, TEXT_CONFIG, TEXTS, TOKENIZER_VOCAB,  # noqa: E402
                          checksum, seeded_weights)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "musicqa" / "EvalMusicQA.json"


def build_tokenizer(data: Path, out: Path) -> None:
    """Train the small byte-level BPE on the MusicQA answers (roberta's special tokens first)."""
    from tokenizers import ByteLevelBPETokenizer

    answers = [r["conversation"][1]["value"] for r in json.loads(data.read_text())]
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(answers, vocab_size=TOKENIZER_VOCAB, min_frequency=2, special_tokens=SPECIAL_TOKENS,
                            show_progress=False)
    out.mkdir(parents=True, exist_ok=True)
    tok.save_model(str(out))
    vocab = json.loads((out / "vocab.json").read_text())
    assert [vocab[t] for t in SPECIAL_TOKENS[:4]] == [0, 1, 2, 3], "roberta's special token ids"


def stub_torchvision() -> None:
    """Placeholder ``torchvision`` modules when the installed one cannot load (laion imports its image
    transforms, datasets and ``FrozenBatchNorm2d`` at import time; the text path uses none of them)."""
    import importlib.abc
    import importlib.machinery
    import types

    try:
        import torchvision  # noqa: F401
        return
    except Exception:
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]

    class _Unused:
        def __init__(self, *args, **kwargs) -> None:
            raise RuntimeError("torchvision stub: not available in this venv")

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            if fullname == "torchvision" or fullname.startswith("torchvision."):
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            mod = types.ModuleType(spec.name)
            mod.__path__ = []
            mod.__getattr__ = lambda attr: _Unused if not attr.startswith("__") else (_ for _ in ()).throw(AttributeError(attr))
            return mod

        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, _Finder())


def patch_hub(tok_dir: Path) -> None:
    """Replace the hub downloads laion_clap makes at import / model creation with local objects."""
    import transformers

    def roberta_tokenizer(cls, *args, **kwargs):
        return transformers.RobertaTokenizer(vocab_file=str(tok_dir / "vocab.json"), merges_file=str(tok_dir / "merges.txt"))

    def roberta_model(cls, *args, **kwargs):
        return transformers.RobertaModel(transformers.RobertaConfig(vocab_size=TOKENIZER_VOCAB, **TEXT_CONFIG))

    transformers.RobertaTokenizer.from_pretrained = classmethod(roberta_tokenizer)
    transformers.RobertaModel.from_pretrained = classmethod(roberta_model)
    transformers.BertTokenizer.from_pretrained = classmethod(lambda cls, *a, **k: None)
    transformers.BartTokenizer.from_pretrained = classmethod(lambda cls, *a, **k: None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    args = ap.parse_args()
    tok_dir = FIXTURE_DIR / "tokenizer"
    if not (tok_dir / "vocab.json").is_file():
        build_tokenizer(args.data, tok_dir)
    patch_hub(tok_dir)
    stub_torchvision()

    import torch

    torch.manual_seed(SEED)
    import laion_clap

    clap = laion_clap.CLAP_Module(enable_fusion=False, amodel="HTSAT-base", device="cpu")
    state = clap.model.state_dict()
    params = dict(clap.model.named_parameters())
    shapes = {k: list(v.shape) for k, v in state.items()
              if k.startswith(("text_branch.", "text_projection.")) and k in params}
    weights = seeded_weights(shapes)
    missing, unexpected = clap.model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
    assert not unexpected and not any(k.startswith(("text_branch.", "text_projection.")) and k in params
                                      for k in missing), (missing, unexpected)

    ids = clap.tokenizer(TEXTS)["input_ids"].tolist()
    with torch.no_grad():
        emb = clap.get_text_embedding(TEXTS)
    assert emb.shape == (len(TEXTS), 512) and np.allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)

    (FIXTURE_DIR / "text_branch.json").write_text(json.dumps(
        {"config": {"vocab_size": TOKENIZER_VOCAB, **TEXT_CONFIG}, "parameters": shapes}, indent=1))
    versions = {p: version(p) for p in ("laion-clap", "torch", "transformers", "numpy", "tokenizers")}
    (FIXTURE_DIR / "goldens.json").write_text(json.dumps({
        "made_by": "scripts/make_clap_golden.py", "seed": SEED, "weights_checksum": checksum(weights),
        "laion": "CLAP_Module(enable_fusion=False, amodel='HTSAT-base').get_text_embedding(texts)",
        "versions": versions, "texts": TEXTS, "input_ids": ids,
        "embeddings": [[float(x) for x in row] for row in emb.astype(np.float32)],
    }, ensure_ascii=False))
    print(f"wrote {FIXTURE_DIR}: {len(TEXTS)} embeddings, {len(shapes)} text-branch parameters; {versions}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
