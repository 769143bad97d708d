"""MMAU-Pro: the loader reads the released ``test.parquet`` unrenamed (tests/fixtures/mmau_pro: the released
columns, ``audio_path`` lists of ``data/<name>.wav``), and the ``mcq_mmau_pro`` judge follows the released
evaluator's rule (github.com/sonalkum/MMAUPro ``evaluate_mmau_pro_comprehensive.py``,
``evaluate_closedended_with_nvembed``): normalised embeddings, the choice with the highest dot product with the
response, the first index on a tie. NV-Embed-v2's weights are not here, so the rule is held with fixed vectors
standing for its embeddings (the judge's own embedder swapped out), and the weight-free ``bag-of-words`` stand-in
on texts; :func:`published_choice` transcribes the released steps.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pyarrow.parquet as pq
import pytest

from evalcore.datasets.base import DatasetContext
from evalcore.datasets.mmau_pro import MMAUPro
from evalcore.datasets.validate import validate_items
from evalcore.judges.mmau_pro import McqMmauProJudge, bag_of_words

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "mmau_pro"


def published_choice(pred: np.ndarray, choices: np.ndarray) -> int:
    """The released steps: L2-normalise the prediction's and the choices' embeddings, scores = 100 × dot
    products, the argmax (first maximal index) is the chosen choice."""
    p = pred / np.linalg.norm(pred)
    c = choices / np.linalg.norm(choices, axis=1, keepdims=True)
    return int(np.argmax((c @ p) * 100))


# fixed "embeddings" standing for NV-Embed-v2's (texts → vectors)
VECS = {
    "Double bass": [1.0, 0.0, 0.0], "Electric guitar": [0.0, 1.0, 0.0], "Tuba": [0.0, 0.0, 1.0],
    "It is a double bass.": [0.9, 0.1, 0.2],
    "Probably a tuba or a double bass": [0.7, 0.0, 0.7],  # equally near two choices
    "I cannot hear any audio.": [0.2, 0.5, 0.1],  # a refusal: still nearest one choice
    "": [0.3, 0.3, 0.4],
}
INSTR = ["Double bass", "Electric guitar", "Tuba"]


def _fixed(embedder: str = "nv-embed-v2", **params) -> McqMmauProJudge:
    judge = McqMmauProJudge(embedder=embedder, **params)
    judge._embed = lambda texts: np.array([np.array(VECS[t]) / np.linalg.norm(VECS[t]) for t in texts])
    return judge


# (response, evalcore's index, the published choice)
CASES = [
    ("It is a double bass.", 0, 0),
    ("Tuba", 2, 2),
    ("I cannot hear any audio.", 1, 1),  # the published rule gives every response a choice
    ("Probably a tuba or a double bass", -1, 0),  # a tie: published takes the first index; evalcore: unanswered
    ("", -1, 2),  # no words: evalcore counts it unanswered (empty_is_unanswered, the default)
]


@pytest.mark.parametrize(("response", "index", "published"), CASES, ids=[c[0][:25] or "empty" for c in CASES])
def test_judge_follows_the_released_rule(response: str, index: int, published: int) -> None:
    assert published_choice(np.array(VECS[response]), np.array([VECS[c] for c in INSTR])) == published
    (got,) = _fixed().judge([response], [INSTR])
    assert got["parsed_index"] == index
    if index != -1:
        assert index == published


def test_empty_response_as_released_when_asked() -> None:
    (got,) = _fixed(empty_is_unanswered=False).judge([""], [INSTR])
    assert got["parsed_index"] == 2  # the released scorer embeds "" and takes its nearest choice


def test_bag_of_words_stand_in() -> None:
    judge = McqMmauProJudge(embedder="bag-of-words")
    assert judge.version == "1-bag-of-words"  # the judged rows name the embedder
    opts = ["Double bass", "Electric guitar", "Tuba", "Synthesizer"]
    texts = ["Double bass", "The bass line is played by a tuba", "(A)", "3/4", None]
    out = judge.judge(texts, [opts, opts, opts, ["3/4", "4/4", "6/8", "5/4"], opts])
    # "tuba" (1 of 8 words) is nearer than "bass" (shared with the 2-word "Double bass"): cos 0.354 > 0.25
    assert [r["parsed_index"] for r in out] == [0, 2, -1, 0, None]  # "(A)": no shared word, all tie
    rows = bag_of_words(["a a b", "", "b"])
    assert np.allclose(np.linalg.norm(rows, axis=1), [1, 0, 1])


def test_nv_embed_is_the_default_published_scorer() -> None:
    judge = McqMmauProJudge()
    assert (judge.embedder, judge.model, judge.version) == ("nv-embed-v2", "nvidia/NV-Embed-v2", "1-nv-embed-v2")


# --------------------------------------------------------------------------- loader


def _items(tmp_path, path=FIXTURES / "test.parquet", **params):
    ds = MMAUPro(path=str(path), **params)
    return validate_items("mmau-pro", ds.items(DatasetContext("mmau-pro", str(tmp_path), 0)))


def test_loader_reads_the_music_category(tmp_path) -> None:
    released = pq.read_table(FIXTURES / "test.parquet").to_pylist()
    assert {"id", "audio_path", "question", "answer", "choices", "length_type", "perceptual_skills",
            "reasoning_skills", "category", "transcription", "task_classification", "task_identifier", "kwargs",
            "sub-cat"} == set(released[0])
    good, bad = _items(tmp_path)
    assert [g["item_id"] for g in good] == ["pro-0001", "pro-0002", "pro-0003"]
    assert len(bad) == 1 and "2 audio clips" in bad[0]["error"]  # multi-clip: counted, not dropped
    first = good[0]
    assert first["options"] == released[0]["choices"] and first["correct_option"] == 0
    assert pathlib.Path(first["audio_uri"]) == FIXTURES / "data" / "pro-0001.wav"
    assert pathlib.Path(first["audio_uri"]).is_file()
    assert (first["task"], first["category"]) == ("mmau-pro", "music")
    assert json.loads(first["metadata"])["secondary_categories"] == ["Timbre Perception and Instrument Recognition"]
    assert good[2]["correct_option"] == 1 and json.loads(good[2]["metadata"])["length_type"] == "long"


def test_categories_and_rows_without_choices(tmp_path) -> None:
    good, _ = _items(tmp_path, categories=["sound"])
    assert [g["item_id"] for g in good] == ["pro-0006"]
    with pytest.raises(ValueError, match="not multiple-choice categories"):
        MMAUPro(path="x.parquet", categories=["open"])
    table = pq.read_table(FIXTURES / "test.parquet")
    rows = table.to_pylist()
    rows[0]["choices"] = []
    path = tmp_path / "test.parquet"
    pq.write_table(table.from_pylist(rows, schema=table.schema), path)
    good, bad = _items(tmp_path, path=path, audio_root=str(FIXTURES))
    assert len(good) == 2 and "fewer than two choices" in bad[0]["error"]
