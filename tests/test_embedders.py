"""A text embedder by config (evalcore/core/embedders.py) for CMI-Bench's tagging rule and MMAU-Pro's judge, on a tiny
random-weight sentence-embedding model built here (a 1-layer BERT with its own word-piece vocabulary, mean pooling
and normalisation, saved as a sentence-transformers folder with a ``query`` prompt, as GTE-Qwen2's is): nothing is
fetched from a hub.

* The tagging rule with that embedder gives the AUCs that the released ``multi_label_bert`` (``embed="gte"``,
  evaluate.py @ 4c15f410) computes with the same model, its steps transcribed below (``released_gte``), and its
  definitions name the model (library, version, folder, config hash).
* ``transformers_mean`` gives the mean-pooled, normalised vectors of the same weights.
* The MMAU-Pro judge takes it in place of NV-Embed-v2, each row L2-normalised as released.
* ``evalcore validate`` names a folder that is not a model, a prompt the model lacks, and a missing package.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sentence_transformers")
pytestmark = pytest.mark.e2e  # tiny model checkpoints: left out by the fast tier (docs/testing.md)

from evalcore.core.embedders import EmbedderSpec, describe, load, path_problem  # noqa: E402

WORDS = sorted(set("rock pop jazz poprock sounds like with some a trio anthem smooth and i hear nothing to say query "
                   "blues violin piano drums double bass female vocals no the answer is".split()))
#: the rows of tests/test_cmi_rules.py's tagging test: (response, answer)
TAG_ROWS = [("Sounds like rock with some pop", "rock, pop"), ("A jazz trio", "jazz"), ("poprock anthem", "poprock"),
            ("Smooth jazz and pop", "pop, jazz"), ("I hear rock", "rock"), ("Nothing to say", "jazz, poprock"),
            ("POP!", "pop")]
TAGS = ("jazz", "pop", "poprock", "rock")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny random-weight sentence-embedding model (seeded), saved as a sentence-transformers folder."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import WordPiece
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root = tmp_path_factory.mktemp("tiny-embedder")
    hf = root / "tiny-gte"
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, ":", "!"])}
    word_pieces = Tokenizer(WordPiece(vocab, unk_token="[UNK]"))
    word_pieces.normalizer = normalizers.BertNormalizer(lowercase=True)
    word_pieces.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    word_pieces.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tok = BertTokenizerFast(tokenizer_object=word_pieces, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]")
    assert tok.tokenize("Jazz trio") == ["jazz", "trio"]
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=64, initializer_range=0.5)
    BertModel(cfg).save_pretrained(hf)
    tok.save_pretrained(hf)
    word = models.Transformer(str(hf))
    st = SentenceTransformer(modules=[word, models.Pooling(word.get_word_embedding_dimension(), "mean"),
                                      models.Normalize()], prompts={"query": "query: "})
    st.save(str(hf))  # the transformer's files at the folder's root, pooling and normalisation beside them
    return hf


def released_gte(result_list: list[dict], answer_list: list[str], path: str) -> dict[str, float]:
    """The released ``multi_label_bert(result_list, answer_list, embed="gte")``, its steps as written, the model
    loaded from ``path``; the one departure: each response's scores are its 1 × n result's one row (appended whole,
    as released, scikit-learn refuses the 3-d array: "Found array with dim 3")."""
    from sentence_transformers import SentenceTransformer
    from sklearn.metrics import average_precision_score, roc_auc_score

    answer_list = sorted([ans.lower().strip() for ans in answer_list])
    y_true, y_pred = [], []
    for tmp in result_list:
        response = tmp["response"].lower().strip()
        correct_answers = tmp["correct_answer"].lower().strip()
        y_true.append([1 if answer in correct_answers else 0 for answer in answer_list])
        model = SentenceTransformer(path, trust_remote_code=True)
        model.max_seq_length = 8192
        query_embeddings = model.encode([response], prompt_name="query")
        document_embeddings = model.encode(answer_list)
        scores = (query_embeddings @ document_embeddings.T) * 100
        y_pred.append(scores.tolist()[0])
    y_true, y_pred = np.array(y_true), np.array(y_pred)
    return {"ROC-AUC": roc_auc_score(y_true, y_pred, average="macro"),
            "PR-AUC": average_precision_score(y_true, y_pred, average="macro")}


def test_the_tagging_rule_with_an_embedder_by_config_gives_the_released_aucs(tiny: Path) -> None:
    from evalcore.mir_rules.tagging import auc_rows, configured

    spec = EmbedderSpec(kind="sentence_transformers", path=str(tiny))
    rule = configured(spec, vocabularies={"toy": TAGS})
    rows = [{"protocol": "p", "dataset": "d", "model": "m", "variant": "v", "condition": "correct", "item_id": f"i{k}",
             "task": "toy", **rule.score(r, a, {"task": "toy"})} for k, (r, a) in enumerate(TAG_ROWS)]
    got = {o["metric"]: o for o in auc_rows(pd.DataFrame(rows), resamples=20, confidence=0.95, seed=0,
                                             embedder=rule.embedder)}
    want = released_gte([{"response": r, "correct_answer": a} for r, a in TAG_ROWS], list(TAGS), str(tiny))
    assert got["roc_auc"]["value"] == want["ROC-AUC"] and got["pr_auc"]["value"] == want["PR-AUC"]
    assert 0 < want["ROC-AUC"] < 1 and len({tuple(json.loads(r["tag_vectors"])["scores"]) for r in rows}) == len(rows)
    import sentence_transformers

    for name in ("roc_auc", "pr_auc"):  # the definition names the model: library, version, folder, config hash
        d = got[name]["definition"]
        assert f"sentence-transformers {sentence_transformers.__version__}: tiny-gte (config sha256 " in d, d
        assert "prompt 'query'" in d and "stand-in" not in d
    assert load(spec) is load(EmbedderSpec(kind="sentence_transformers", path=str(tiny)))  # loaded once a process


def test_the_mir_scorer_takes_the_protocols_similarity(tiny: Path) -> None:
    """The run's scorer (and the stream's) builds the tagging rule from the protocol's ``similarity``; without
    one it is the stand-in, which says so."""
    from evalcore.scorers.mir import MirScorer, score_batch

    spec = {"kind": "sentence_transformers", "path": str(tiny)}
    assert MirScorer(spec).rules["cmi_tagging"].embedder == describe(EmbedderSpec(**spec))
    assert "stand-in" in MirScorer().rules["cmi_tagging"].embedder
    import pyarrow as pa

    from evalcore.pipeline.stages import JUDGED

    row = {"protocol": "cmi", "error": None, "n_chunks": 1, "task": "MTG_genre", "category": "cmi_tagging",
           "reference": "rock, pop", "metadata": None, "request_id": "a", "text": "rock and pop"}
    table = pa.Table.from_pylist([{f.name: row.get(f.name) for f in JUDGED}], schema=JUDGED)
    stand_in, real = (json.loads(score_batch(table, ["cmi"], sim).column("scores")[0].as_py())
                      for sim in (None, {"cmi": spec}))
    from evalcore.mir_rules.tagging import VOCABULARIES

    want = load(EmbedderSpec(**spec)).similarity("rock and pop", VOCABULARIES["MTG_genre"])
    assert json.loads(real["tag_vectors"])["scores"] == [float(x) for x in want]
    assert json.loads(real["tag_vectors"])["scores"] != json.loads(stand_in["tag_vectors"])["scores"]


def test_transformers_mean_pooling_is_the_mean_over_the_mask_normalised(tiny: Path) -> None:
    from sentence_transformers import SentenceTransformer

    texts = ["a jazz trio", "rock", "i hear nothing to say"]
    mean = load(EmbedderSpec(kind="transformers_mean", path=str(tiny))).encode(texts)
    st = SentenceTransformer(str(tiny), local_files_only=True).encode(texts)  # mean pooling + Normalize, no prompt
    assert mean.shape == st.shape and np.allclose(mean, st, atol=1e-5)
    assert np.allclose(np.linalg.norm(mean, axis=1), 1.0, atol=1e-6)


def test_the_mmau_pro_judge_takes_an_embedder_by_config(tiny: Path) -> None:
    from evalcore.judges.mmau_pro import McqMmauProJudge, first_nearest, nearest_choice
    from evalcore.judges.parser import named

    judge = McqMmauProJudge(similarity={"kind": "sentence_transformers", "path": str(tiny)})
    assert judge.version == "2-sentence_transformers:tiny-gte"
    options = ["Double bass", "Piano", "Female vocals"]
    emb = load(EmbedderSpec(kind="sentence_transformers", path=str(tiny)))
    for text in ("The answer is piano", "double bass", "no vocals", "i hear the drums"):
        vecs = emb.encode([text, *options]).astype(np.float64)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)  # as released: each embedding L2-normalised
        got = judge.read(text, options)
        assert got["credited"] == named(first_nearest(vecs[0], vecs[1:]))  # the released argmax
        assert got["parsed_index"] == nearest_choice(vecs[0], vecs[1:])
    with pytest.raises(ValueError, match="either embedder"):
        McqMmauProJudge(embedder="bag-of-words", similarity={"kind": "sentence_transformers", "path": str(tiny)})


def test_validate_names_an_embedder_that_cannot_load_and_the_packages_it_needs(tiny: Path, tmp_path,
                                                                                 monkeypatch) -> None:
    from evalcore.judges.mmau_pro import McqMmauProJudge

    assert path_problem(EmbedderSpec(kind="sentence_transformers", path=str(tiny))) is None
    assert "not a local folder" in path_problem(EmbedderSpec(kind="sentence_transformers", path=str(tmp_path / "x")))
    assert "holds no modules.json" in path_problem(EmbedderSpec(kind="sentence_transformers", path=str(tmp_path)))
    lacks = path_problem(EmbedderSpec(kind="sentence_transformers", path=str(tiny), query_prompt="search_query"))
    assert "defines no prompt 'search_query' (its prompts: ['document', 'query'])" in lacks
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # not installed
    from evalcore.core.packages import METRICS_EXTRA, importable

    if importable("sentence_transformers"):
        pytest.skip("the import system still finds sentence_transformers")
    said = McqMmauProJudge.packages_problem({"similarity": {"kind": "sentence_transformers", "path": str(tiny)}})
    assert said == f"needs sentence_transformers, which do not import here; install: {METRICS_EXTRA}"
