"""CIDEr-D: equals direct pycocoevalcap calls (PTB tokenizer + Cider) per corpus on real MusicQA references."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

from evalcore.textmetrics import text_profiles as tp
from evalcore.textmetrics.registered import cider

from data_paths import MUSICQA_JSON as DATA, missing  # noqa: E402


@pytest.fixture(scope="module")
def rows() -> tuple[list[str], list[str], list[str]]:
    if not DATA.is_file():
        pytest.skip(missing(DATA))
    answers = [r["conversation"][1]["value"] for r in json.loads(DATA.read_text())[::131][:20]]
    refs, cands, corpora = [], [], []
    for cond, make in (("correct", lambda i, a: " ".join(a.split()[: len(a.split()) * 2 // 3])),
                       ("random", lambda i, a: answers[(i + 3) % len(answers)])):
        for i, a in enumerate(answers):
            refs.append(a)
            cands.append(make(i, a))
            corpora.append(cond)
    return refs, cands, corpora


def direct(refs: list[str], cands: list[str]) -> tuple[float, list[float]]:
    """The coco-caption recipe: tokenize gts and res with PTBTokenizer, then Cider().compute_score."""
    tok = PTBTokenizer()
    gts = tok.tokenize({i: [{"caption": r}] for i, r in enumerate(refs)})
    res = tok.tokenize({i: [{"caption": c}] for i, c in enumerate(cands)})
    score, per = Cider().compute_score(gts, res)
    return float(score), [float(v) for v in per]


def test_per_corpus_values_equal_pycocoevalcap(rows):
    refs, cands, corpora = rows
    got = tp.score_pairs(refs, cands, "standard", metrics=["cider"], corpora=corpora)
    assert got.errors == [None] * len(refs)
    for cond in ("correct", "random"):
        idx = [i for i, c in enumerate(corpora) if c == cond]
        mean, per = direct([refs[i] for i in idx], [cands[i] for i in idx])
        assert [got.values["cider"][i] for i in idx] == pytest.approx(per, abs=1e-9)
        assert sum(per) / len(per) == pytest.approx(mean, abs=1e-12)
    mean = {c: sum(v for v, k in zip(got.values["cider"], corpora) if k == c) / 20 for c in ("correct", "random")}
    assert mean["correct"] > 1.0 > mean["random"] > 0.0
    assert "PTB tokenizer" in got.info["definitions"]["cider"] and "pycocoevalcap" in got.info["versions"]


def test_one_corpus_differs_from_two(rows):
    refs, cands, corpora = rows
    one = tp.score_pairs(refs, cands, "mullama", metrics=["cider"]).values["cider"]
    assert one == pytest.approx(direct(refs, cands)[1], abs=1e-9)
    two = tp.score_pairs(refs, cands, "mullama", metrics=["cider"], corpora=corpora).values["cider"]
    assert one != two  # IDF is corpus-level: documented


def test_line_breaks_do_not_shift_rows():
    refs = ["a warm\rpiano\u2028melody", "loud drums\x0cand bass", "a sad violin\u2029solo", "a fast flute"]
    cands = ["a warm piano", "loud drums", "a sad violin", "a fast flute"]
    got, errs = cider.cider_scores(refs, cands)
    flat, _ = cider.cider_scores([cider.one_line(r) for r in refs], cands)
    assert errs == [None] * 4 and got == flat and all(v > 0 for v in got)


def test_single_row_corpus_and_empty_candidate_and_missing_java(monkeypatch, tmp_path):
    vals, errs = cider.cider_scores(["a calm piano piece"], ["a calm piano piece"])
    assert vals == [0.0] and errs == [None]  # log(1 document) = 0
    got = tp.score_pairs(["a calm piano", "fast drums", None], ["", "fast drums", "x"], metrics=["cider"])
    assert got.values["cider"][0] == 0.0 and got.errors[0] is None and got.values["cider"][1] > 1.0
    assert got.values["cider"][1] == pytest.approx(direct(["a calm piano", "fast drums"], ["", "fast drums"])[1][1])
    assert math.isnan(got.values["cider"][2]) and "missing reference" in got.errors[2]
    monkeypatch.setenv("PATH", str(tmp_path))  # no java on PATH
    with pytest.raises(cider.MetricUnavailable, match="default-jre-headless"):
        cider.cider_scores(["a"], ["a"])
