"""MMAU-Pro: the loader reads the released ``test.parquet`` unrenamed (tests/fixtures/mmau_pro: the released
columns, ``audio_path`` lists of ``data/<name>.wav``), and the ``mcq_mmau_pro`` judge follows the released
evaluator's rule (github.com/sonalkum/MMAUPro ``evaluate_mmau_pro_comprehensive.py``,
``evaluate_closedended_with_nvembed``): normalised embeddings, the choice with the highest dot product with the
response, the first index on a tie. NV-Embed-v2's weights are not here, so the rule is held with fixed vectors
standing for its embeddings (the judge's own embedder swapped out), and the weight-free ``bag-of-words`` stand-in
on texts; :func:`published_choice` transcribes the released steps.

The judge's default verdict (``credited``, the scorer's ``correct``) is the released choice on every case, and its
strict reading (``parsed_index``, ``correct_strict``) the one before the published verdict was added: a tie, or a
response without a word, unanswered. Ties are decided with one tolerance (``TIE_RTOL``): the stand-in's similarities
are ratios of integers, so the released steps are run exactly (:func:`exact_released_choice`, in rationals) on ≥ 10,000
seeded responses, and the judge must agree with them on every tie and every choice.
"""

from __future__ import annotations

import json
import pathlib
import random
import re
from collections import Counter
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest

from evalcore.datasets.base import DatasetContext
from evalcore.datasets.mmau_pro import MMAUPro
from evalcore.datasets.validate import validate_items
from evalcore.core.embedders import bag_of_words
from evalcore.judges.mmau_pro import TIE_RTOL, McqMmauProJudge, first_nearest, nearest, nearest_choice
from evalcore.scorers.mcq import MCQScorer

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


# (response, evalcore's strict index, the published choice)
CASES = [
    ("It is a double bass.", 0, 0),
    ("Tuba", 2, 2),
    ("I cannot hear any audio.", 1, 1),  # the published rule gives every response a choice
    ("Probably a tuba or a double bass", -1, 0),  # a tie: published takes the first index; strict: unanswered
    ("", -1, 2),  # no words: the published scorer embeds "" and takes its nearest; strict: unanswered
]


@pytest.mark.parametrize(("response", "index", "published"), CASES, ids=[c[0][:25] or "empty" for c in CASES])
def test_judge_follows_the_released_rule(response: str, index: int, published: int) -> None:
    """Default figure = the released choice, strict figure = the strict index, for every answer the case could
    have (scored as a run scores it)."""
    assert published_choice(np.array(VECS[response]), np.array([VECS[c] for c in INSTR])) == published
    (got,) = _fixed().judge([response], [INSTR])
    assert got == {"parsed_index": index, "credited": [published]}
    rows = [{**got, "correct_index": answer} for answer in range(len(INSTR))]
    scored = MCQScorer().score(rows)
    assert [s["correct"] for s in scored] == [float(published == a) for a in range(len(INSTR))]
    assert [s["correct_strict"] for s in scored] == [float(index == a) for a in range(len(INSTR))]


def test_empty_response_as_released_when_asked() -> None:
    (got,) = _fixed(empty_is_unanswered=False).judge([""], [INSTR])
    assert got == {"parsed_index": 2, "credited": [2]}  # the strict reading embeds "" too, as released


def test_bag_of_words_stand_in() -> None:
    judge = McqMmauProJudge(embedder="bag-of-words")
    assert judge.version == "2-bag-of-words"  # the judged rows name the embedder
    opts = ["Double bass", "Electric guitar", "Tuba", "Synthesizer"]
    texts = ["Double bass", "The bass line is played by a tuba", "(A)", "3/4", None]
    out = judge.judge(texts, [opts, opts, opts, ["3/4", "4/4", "6/8", "5/4"], opts])
    # "tuba" (1 of 8 words) is nearer than "bass" (shared with the 2-word "Double bass"): cos 0.354 > 0.25
    assert [r["parsed_index"] for r in out] == [0, 2, -1, 0, None]  # "(A)": no shared word, all tie
    assert [r.get("credited") for r in out] == [[0], [2], [0], [0], None]  # the released first index on the tie
    rows = bag_of_words(["a a b", "", "b"])
    assert np.allclose(np.linalg.norm(rows, axis=1), [1, 0, 1])


# --------------------------------------------------------------------------- ties, with one stated tolerance


def exact_released_choice(response: str, choices: list[str]) -> tuple[int, list[int]]:
    """The released steps on the bag-of-words counts, exactly: cosine = dot / (|r| |c|) compared as rationals
    (dot² / |c|², every dot ≥ 0), the first maximal index taken as ``argmax`` takes it; and every maximal index."""
    def counts(t: str) -> Counter:
        return Counter(re.findall(r"\b\w+\b", t.lower()))
    r = counts(response)
    keys = []
    for c in map(counts, choices):
        dot, norm2 = sum(n * c[w] for w, n in r.items()), sum(n * n for n in c.values())
        keys.append(Fraction(dot * dot, norm2) if norm2 else Fraction(0))
    top = max(keys)
    tied = [i for i, k in enumerate(keys) if k == top]
    return tied[0], tied


def test_a_tie_the_last_bit_decided_is_a_tie() -> None:
    """ "Not No vocals, but Female vocals" is 0.75 to both "No vocals" and "Female vocals"; the stand-in's float
    sums give 0.75 and 0.75 + 1.1e-16 (an exact ``==`` took index 2: neither the released first index nor the
    strict "unanswered"). With the tolerance: the released choice (1) by default, unanswered strictly."""
    opts = ["Choir", "No vocals", "Female vocals", "Spoken word"]
    text = "Not No vocals, but Female vocals"
    vecs = bag_of_words([text, *opts])
    sims = vecs[1:] @ vecs[0]
    assert sims[2] - sims[1] == pytest.approx(1.1e-16, abs=1e-17) and int(np.argmax(sims)) == 2  # the defect's input
    assert exact_released_choice(text, opts) == (1, [1, 2])
    assert list(nearest(vecs[0], vecs[1:])) == [1, 2]
    assert (nearest_choice(vecs[0], vecs[1:]), first_nearest(vecs[0], vecs[1:])) == (-1, 1)
    (got,) = McqMmauProJudge(embedder="bag-of-words").judge([text], [opts])
    assert got == {"parsed_index": -1, "credited": [1]}


def test_the_same_tolerance_for_a_real_embedders_float32_vectors() -> None:
    """NV-Embed-v2 gives float32 vectors: two choices whose exact similarities are equal stay a tie (widened to
    float64 before the dot products, where the float32 products are exact), and one apart by more than
    ``TIE_RTOL`` is not."""
    rng = np.random.default_rng(0)
    r = rng.uniform(0.1, 1.0, size=1024).astype(np.float32)
    r[1] = r[0]
    a = rng.uniform(0.1, 1.0, size=1024).astype(np.float32)
    b = a.copy()
    b[[0, 1]] = a[[1, 0]]  # the same similarity to r, summed in another order
    choices = np.stack([a * np.float32(0.5), a, b])
    assert list(nearest(r, choices)) == [1, 2]
    judge = McqMmauProJudge()  # the real embedder's path, its model swapped for these vectors
    judge._embed = lambda texts: r[None, :] if len(texts) == 1 else choices
    assert judge.judge(["x"], [["half", "a", "b"]]) == [{"parsed_index": -1, "credited": [1]}]
    one = np.array([1.0])
    assert nearest_choice(one, np.array([[1.0], [1.0 - 3 * TIE_RTOL]])) == 0  # apart: a choice
    assert nearest_choice(one, np.array([[1.0], [1.0 - TIE_RTOL / 2]])) == -1  # within the tolerance: a tie


VOCAL = ["No vocals", "Female vocals", "Male vocals", "Female choir", "Male choir", "No choir", "Vocals and choir",
         "Solo piano", "Piano", "Piano and vocals", "Spoken word", "Humming"]
FILL = ["not", "but", "the", "it", "is", "a", "maybe", "and", "no", "female", "male", "vocals", "piano", "choir"]


def seeded_responses(n: int, seed: int = 0) -> list[tuple[str, list[str]]]:
    """``n`` (response, choices) pairs: 2 to 5 choices drawn from :data:`VOCAL` (many share words), responses of 0
    to 8 words drawn from the choices' words and fillers, with punctuation."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        choices = rng.sample(VOCAL, rng.randint(2, 5))
        words = [w for c in choices for w in c.split()] + FILL
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 8)))
        out.append((rng.choice(["", "The answer: ", "("]) + text + rng.choice(["", ".", "!", ", I think."]), choices))
    return out


def test_nearest_choice_agrees_with_the_released_steps_on_every_tie() -> None:
    """≥ 10,000 seeded responses: the strict reading is the released choice where it is unique and unanswered on
    every exact tie; the default verdict is the released choice (the first maximal index) on every response."""
    judge = McqMmauProJudge(embedder="bag-of-words")
    ties = exact_ties_missed = 0
    for text, choices in seeded_responses(10_000):
        first, tied = exact_released_choice(text, choices)
        got = judge.read(text, choices)
        wordless = not re.search(r"\w", text)
        assert got["credited"] == [first], (text, choices)
        assert got["parsed_index"] == (-1 if len(tied) > 1 or wordless else first), (text, choices)
        if len(tied) > 1:
            ties += 1
            vecs = bag_of_words([text, *choices])
            sims = vecs[1:] @ vecs[0]
            exact_ties_missed += int(len(np.flatnonzero(sims == sims.max())) != len(tied))
    assert ties > 1_000  # the search reaches ties, of zero similarity and of equal non-zero ones
    assert exact_ties_missed > 0  # ... including ties the float sums break in the last bit (an exact == misses them)


def test_nv_embed_is_the_default_published_scorer() -> None:
    judge = McqMmauProJudge()
    assert (judge.embedder, judge.model, judge.version) == ("nv-embed-v2", "nvidia/NV-Embed-v2", "2-nv-embed-v2")


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
