"""CLAPText: evalcore's text branch equals laion_clap's get_text_embedding (offline goldens), Ray path, loading."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from evalcore.textmetrics import text_profiles as tp
from evalcore.textmetrics.registered import clap_text as ct

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("clap_fixture", REPO / "scripts" / "clap_fixture.py")
cf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cf)
GOLDENS = json.loads((cf.FIXTURE_DIR / "goldens.json").read_text())
TOKENIZER = str(cf.FIXTURE_DIR / "tokenizer")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clap") / "music_random_seeded.pt"
    assert cf.write_laion_checkpoint(path) == GOLDENS["weights_checksum"], "weight generator not reproducible"
    return path


@pytest.fixture(scope="module")
def cfg(checkpoint) -> ct.ClapTextConfig:
    return ct.ClapTextConfig(checkpoint=str(checkpoint), tokenizer=TOKENIZER, batch_size=3)


@pytest.fixture(scope="module")
def embedder(cfg) -> ct.ClapTextEmbedder:
    return ct.ClapTextEmbedder(cfg)


def test_fixture_is_small():
    size = sum(p.stat().st_size for p in cf.FIXTURE_DIR.rglob("*") if p.is_file())
    assert size < 5_000_000


def test_tokens_equal_laions(embedder):
    ids = embedder.tokenize(GOLDENS["texts"])["input_ids"].tolist()
    assert ids == GOLDENS["input_ids"]
    assert max(sum(i != 1 for i in row) for row in ids) == ct.CONTEXT_LENGTH  # the long text is truncated at 77


def test_embeddings_equal_laion_goldens(embedder):
    got = embedder.embed(GOLDENS["texts"])  # batches of 3: batching must not matter
    want = np.array(GOLDENS["embeddings"], dtype=np.float32)
    assert got.shape == want.shape == (len(GOLDENS["texts"]), 512)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    # the goldens differ from each other, so a constant or wrongly pooled output could not pass
    assert np.abs(want[0] - want[1]).max() > 0.01


def test_loader_takes_bare_state_dicts_and_rejects_wrong_ones(checkpoint, tmp_path):
    import torch

    full = torch.load(checkpoint, weights_only=True)["state_dict"]
    bare = {k[len("module."):]: v for k, v in full.items()}
    torch.save(bare, tmp_path / "bare.pt")
    enc = ct.load_encoder(str(tmp_path / "bare.pt"))
    assert enc.text_branch.config.num_hidden_layers == 2 and enc.text_branch.config.vocab_size == 1000
    del bare["text_branch.encoder.layer.1.output.dense.bias"]
    torch.save(bare, tmp_path / "broken.pt")
    with pytest.raises(ValueError, match="missing"):
        ct.load_encoder(str(tmp_path / "broken.pt"))
    torch.save({"state_dict": {"module.audio_branch.x": torch.zeros(2)}}, tmp_path / "audio_only.pt")
    with pytest.raises(ValueError, match="roberta text branch"):
        ct.load_encoder(str(tmp_path / "audio_only.pt"))


def test_claptext_pairs_are_cosines_and_bad_rows_documented(cfg, embedder):
    texts = GOLDENS["texts"]
    want = np.array(GOLDENS["embeddings"], dtype=np.float64)
    refs = [texts[0], texts[1], texts[3], texts[0], None, texts[0], "x" * 1_000_000]
    cands = [texts[1], texts[1], texts[5], "", texts[0], 7, texts[0]]
    got = tp.score_pairs(refs, cands, "mullama", metrics=["claptext"], models=tp.ModelMetrics({"claptext": cfg}))
    v, e = got.values["claptext"], got.errors
    assert v[0] == pytest.approx(float(want[0] @ want[1]), abs=1e-5)
    assert v[1] == pytest.approx(1.0, abs=1e-6) and v[2] == pytest.approx(float(want[3] @ want[5]), abs=1e-5)
    assert v[3] == 0.0 and e[3] is None  # empty candidate: documented 0.0
    for i, what in ((4, "missing reference"), (5, "not a string"), (6, "reference too long")):
        assert math.isnan(v[i]) and what in e[i]
    assert "NOT the paper's music_audioset_epoch_15_esc_90.14.pt" in got.info["definitions"]["claptext"]
    assert got.info["models"]["claptext"]["embedding"] == {"texts": 6, "distinct": 4, "ray_actors": 0}


def test_an_embedder_embeds_a_text_once_across_calls_and_its_memo_is_bounded(cfg, monkeypatch):
    embedder = ct.ClapTextEmbedder(cfg)
    texts = GOLDENS["texts"]
    first = embedder.embed_distinct(texts[:4] + texts[:2])
    assert list(first) == texts[:4] and embedder.count() == 4
    again = embedder.embed_distinct(texts[2:6])  # two known, two new
    assert embedder.count() == 6
    want = np.array(GOLDENS["embeddings"], dtype=np.float32)
    for i, t in enumerate(texts[:6]):
        np.testing.assert_allclose({**first, **again}[t], want[i], atol=1e-5, rtol=0)
    monkeypatch.setattr(ct, "MEMO_TEXTS", 7)  # full: cleared, then this call's texts embedded anew
    embedder.embed_distinct(texts[4:8])
    assert embedder.count() == 10 and len(embedder.memo) == 4


@pytest.mark.ray
def test_ray_actor_embeds_each_distinct_text_once(cfg, embedder, local_ray):
    refs = [GOLDENS["texts"][i % 4] for i in range(40)]  # 4 distinct references, repeated
    cands = [GOLDENS["texts"][(i * 3) % 8] for i in range(40)]
    emb, stats = ct.embed_texts(refs + cands, cfg, ray_actors=1)
    distinct = len(set(refs + cands))
    assert stats["distinct"] == distinct == len(emb) and stats["embedded_by_actors"] == distinct
    local = embedder.embed(list(emb))
    np.testing.assert_allclose(np.stack(list(emb.values())), local, atol=1e-6, rtol=0)
    ray_scores = tp.score_pairs(refs, cands, metrics=["claptext"], models=tp.ModelMetrics({"claptext": cfg.model_copy(update={"actors": 1})}))
    plain = tp.score_pairs(refs, cands, metrics=["claptext"], models=tp.ModelMetrics({"claptext": cfg}))
    np.testing.assert_allclose(ray_scores.values["claptext"], plain.values["claptext"], atol=1e-6)
