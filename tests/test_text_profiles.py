"""Free-form text metric profiles on real MusicQA references, bad rows, and offline WordNet."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from evalcore.textmetrics import text_profiles as tp
from evalcore.textmetrics import wordnet as wnmod

from data_paths import MUSICQA_JSON as DATA, missing  # noqa: E402


def derived_pairs(n: int = 300, seed: int = 0) -> tuple[list[str], list[str]]:
    """(references, candidates): real answers vs itself / another row's answer / truncated / shuffled / recased."""
    if not DATA.is_file():
        pytest.skip(missing(DATA))
    answers = [r["conversation"][1]["value"] for r in json.loads(DATA.read_text())]
    rng = random.Random(seed)
    refs, cands = [], []
    for i in range(n):
        ref = answers[rng.randrange(len(answers))]
        words = ref.split()
        kind = i % 5
        if kind == 0:
            cand = ref
        elif kind == 1:
            cand = answers[rng.randrange(len(answers))]
        elif kind == 2:
            cand = " ".join(words[: max(1, len(words) // 2)])
        elif kind == 3:
            rng.shuffle(words)
            cand = " ".join(words)
        else:
            cand = ref.upper().replace(",", "")
        refs.append(ref)
        cands.append(cand)
    return refs, cands


def direct_mullama(ref: str, cand: str) -> tuple[float, float, float, float]:
    """The MU-LLaMA script's calls, written out independently of the module."""
    from nltk.tokenize import wordpunct_tokenize
    from nltk.translate.bleu_score import sentence_bleu
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer

    return (
        sentence_bleu([ref], cand),
        sentence_bleu([ref], cand, weights=(0, 0, 0, 1)),
        meteor_score([wordpunct_tokenize(ref)], wordpunct_tokenize(cand)),
        rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(ref, cand)["rougeL"].recall,
    )


@pytest.fixture(scope="module")
def pairs():
    wnmod.ensure_wordnet()
    return derived_pairs()


def test_mullama_equals_direct_library_calls(pairs):
    import warnings

    refs, cands = pairs
    got = tp.score_pairs(refs, cands, "mullama")
    assert got.errors == [None] * len(refs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = [direct_mullama(r, c) for r, c in zip(refs, cands)]
    for m, col in enumerate(tp.lexical_names()):
        for i, w in enumerate(want):
            assert abs(got.values[col][i] - w[m]) <= 1e-9, (col, i, got.values[col][i], w[m])
    # the derived candidates spread the scores (an always-0 or always-1 scorer would fail above anyway)
    assert got.values["bleu"][0] == pytest.approx(1.0) and min(got.values["bleu4"]) < 0.5
    assert {"nltk", "rouge-score", "sacrebleu"} <= set(got.info["versions"]) and got.info["profile"] == "mullama"


@pytest.mark.parametrize("profile", tp.PROFILES)
def test_fast_path_equals_plain_loop_exactly(pairs, profile, monkeypatch):
    refs, cands = pairs
    refs, cands = refs + refs[:50], cands + cands[:50]  # duplicates exercise the dedupe
    plain = tp.score_pairs(refs, cands, profile, fast=False)
    monkeypatch.setattr(tp, "PARALLEL_MIN", 0)  # force the process pool on a small input
    fast = tp.score_pairs(refs, cands, profile, fast=True, workers=2)
    assert fast.values == plain.values and fast.errors == plain.errors
    assert fast.corpus == plain.corpus


def test_standard_profile_definitions(pairs):
    import sacrebleu
    from nltk.tokenize import wordpunct_tokenize
    from nltk.translate.meteor_score import meteor_score
    from rouge_score import rouge_scorer

    refs, cands = pairs[0][:40], pairs[1][:40]
    got = tp.score_pairs(refs, cands, "standard")
    sb = sacrebleu.BLEU(tokenize="13a", smooth_method="exp", effective_order=True)
    rs = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    for i, (r, c) in enumerate(zip(refs, cands)):
        assert got.values["bleu"][i] == sb.sentence_score(c, [r]).score / 100
        assert got.values["meteor"][i] == meteor_score([wordpunct_tokenize(r.lower())], wordpunct_tokenize(c.lower()))
        assert got.values["rouge"][i] == rs.score(r, c)["rougeL"].fmeasure
    assert got.values["bleu4"][0] == pytest.approx(1.0) and got.values["bleu4"][1] == 0.0  # strict 4-gram BLEU
    want = sacrebleu.BLEU(tokenize="13a").corpus_score(cands, [refs]).score / 100
    assert got.corpus["corpus_bleu"] == pytest.approx(want)


@pytest.mark.parametrize("fast", [True, False])
def test_bad_rows_give_errors_or_documented_values(fast):
    ref = "The audio is a calm piano piece."
    big = "piano " * 200_000  # ~1.2 MB
    refs = [ref, ref, ref, ref, None, "", 17, ref, big, ref]
    cands = ["", "   ", None, 3.5, "calm piano", "calm piano", "calm", big, "calm", "a calm piano piece"]
    got = tp.score_pairs(refs, cands, "mullama", fast=fast)
    e = got.errors
    assert e[0] is None and e[1] is None and all(got.values[m][0] == 0.0 == got.values[m][1] for m in tp.lexical_names())
    for i, what in ((2, "not a string"), (3, "not a string"), (4, "missing reference"), (5, "empty reference"),
                    (6, "missing reference"), (7, "candidate too long"), (8, "reference too long")):
        assert e[i] is not None and what in e[i], (i, e[i])
        assert all(math.isnan(got.values[m][i]) for m in tp.lexical_names())
    assert e[9] is None and 0 < got.values["rouge"][9] <= 1


def test_lexnames_format():
    lines = wnmod.lexnames_text().splitlines()
    assert len(lines) == 45 and lines[0] == "00\tadj.all\t3" and lines[3] == "03\tnoun.Tops\t1"
    assert lines[29] == "29\tverb.body\t2" and lines[44] == "44\tadj.ppl\t3" and lines[2] == "02\tadv.all\t4"


def test_missing_debian_files_name_the_fix(tmp_path):
    with pytest.raises(wnmod.WordNetUnavailable, match="apt-get install"):
        wnmod.provision(tmp_path / "nltk", source=tmp_path / "nowhere")


@pytest.mark.e2e  # a Python of its own
@pytest.mark.skipif(not (wnmod.DEBIAN_WORDNET / "data.noun").is_file(), reason="Debian wordnet-base not installed")
def test_wordnet_provisioned_from_debian_files(tmp_path):
    data = wnmod.provision(tmp_path / "nltk_data")
    wn_dir = data / "corpora" / "wordnet"
    assert (wn_dir / "lexnames").read_text() == wnmod.lexnames_text()
    assert (wn_dir / "index.sense").stat().st_size > 1_000_000
    code = (
        "import nltk, warnings; warnings.simplefilter('ignore')\n"
        "from nltk.corpus import wordnet as wn\n"
        "from nltk.translate.meteor_score import meteor_score\n"
        "print(wn.root, wn.get_version(), wn.synsets('guitar')[0].name(), wn.lemma_from_key('dog%1:05:00::'),\n"
        "      meteor_score([['the', 'dogs', 'run']], ['a', 'dog', 'running']))\n"
    )
    env = {**os.environ, "NLTK_DATA": str(data), "HOME": str(tmp_path)}  # no other nltk data on the path
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    root, version, guitar, lemma, meteor = out.stdout.split()
    assert root.startswith(str(data)) and version == "3.0" and guitar == "guitar.n.01"
    assert lemma == "Lemma('dog.n.01.dog')" and float(meteor) > 0.5


def test_model_metrics_need_their_models_and_known_names():
    with pytest.raises(ValueError, match="unknown metric"):
        tp.score_pairs(["a"], ["a"], metrics=["bleurt"])
    with pytest.raises(ValueError, match="bertscore needs"):
        tp.score_pairs(["a"], ["a"], metrics=["bertscore"])
    with pytest.raises(ValueError, match="claptext needs"):
        tp.score_pairs(["a"], ["a"], metrics=["claptext"])
    from evalcore.textmetrics.freeform_metric import registered

    # evalcore.textmetrics.registered registers these, in this order (a test may register more after them: toy_recall)
    assert registered()[:7] == [*tp.lexical_names()[:4], "bertscore", "cider", "claptext"]
    assert tp.lexical_names() == ["bleu", "bleu4", "meteor", "rouge"]


@pytest.mark.e2e  # a Python of its own
@pytest.mark.skipif(not (wnmod.DEBIAN_WORDNET / "data.noun").is_file(), reason="Debian wordnet-base not installed")
def test_check_wordnet_finds_or_provisions_without_loading(tmp_path):
    code = (
        "import sys\n"
        "from evalcore.textmetrics.wordnet import check_wordnet\n"
        "from nltk.corpus import wordnet as wn\n"
        "where = check_wordnet()\n"
        "print(where, type(wn).__name__)\n"  # still the lazy loader: nothing was read
    )
    data = tmp_path / "nltk_data"
    env = {**os.environ, "NLTK_DATA": str(data), "EVALCORE_NLTK_DATA": str(data), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    where, kind = out.stdout.split()
    assert where == str(data / "corpora" / "wordnet") and kind == "LazyCorpusLoader"
    assert (data / "corpora" / "wordnet" / "lexnames").is_file()


@pytest.mark.parametrize("profile", tp.PROFILES)
def test_each_lexical_metric_alone_scores_as_in_the_full_set(pairs, profile):
    """A metric's value is its own file's (:meth:`LexicalMetric.value`): scored alone, fast or plain, it is the
    value it has beside the others (nltk's shared BLEU call for BLEU and BLEU-4 included)."""
    refs, cands = pairs[0][:60], pairs[1][:60]
    every = tp.score_pairs(refs, cands, profile)
    for name in tp.lexical_names():
        for fast in (True, False):
            alone = tp.score_pairs(refs, cands, profile, fast=fast, metrics=[name])
            assert list(alone.values) == [name] and alone.values[name] == every.values[name], (name, fast)
    assert ("corpus_bleu" in tp.score_pairs(refs, cands, profile, metrics=["bleu"]).corpus) == (profile == "standard")
