"""The numbers of the papers' prose in configs/paper/published.csv (each paper's ``text`` table): each with the
sentence it comes from, that sentence the paper's own (tests/paper_text.py: whitespace, the extraction's glyph
commands and a word broken across lines aside), and the factual paper's two differences held to its tables.
"""

from __future__ import annotations

import re

import pytest

from evalcore.reports import published
from paper_text import flat, glyphs, paper
from test_published_values import PAPER_FILES


@pytest.fixture(scope="module")
def cells() -> list[published.Cell]:
    return published.read()


@pytest.fixture(scope="module")
def papers() -> dict[str, str]:
    return {p: paper(f) for p, f in PAPER_FILES.items()}  # skips, naming the path, without the papers' text

#: the numbers of the papers' prose the file must hold: (paper, group, metric) → value as printed
PROSE = {("factual", "all", "cider"): "0.1106", ("factual", "all", "rouge"): "0.03472",
         ("factual", "all", "f1_micro"): "0.125",
         ("hummusqa", "all", "items"): "320", ("hummusqa", "all", "tracks"): "108",
         ("hummusqa", "category=Instrumentation", "items_share"): "19.7",
         ("hummusqa", "category=Harmony", "items_share"): "11.3",
         ("hummusqa", "category=Melody", "items_share"): "10.6",
         ("hummusqa", "category=Musical Texture", "items_share"): "3.5",
         ("hummusqa", "category=Structure", "items_share"): "3.5",
         ("hummusqa", "category=Lyrics", "items_share"): "3.5",
         ("hummusqa", "difficulty=Low", "items_share"): "44.4", ("hummusqa", "difficulty=Medium", "items_share"): "38.4",
         ("hummusqa", "difficulty=High", "items_share"): "17.2", ("hummusqa", "all", "accuracy"): "25",
         ("hummusqa", "difficulty=High", "accuracy"): "50",
         ("muchomusic", "all", "accuracy"): "51.4", ("muchomusic", "dimension=reasoning", "items_share"): "44",
         ("muchomusic", "category=musiccaps", "items"): "858", ("muchomusic", "category=sdd", "items"): "329",
         ("muchomusic", "all", "generated_pairs"): "2091"}


def _prose(cells: list[published.Cell], paper: str, model: str | None = None, metric: str | None = None,
           group: str | None = None) -> published.Cell:
    found = [c for c in published.cells_of(f"{paper}/text", cells)
             if (model is None or c.model == model) and (metric is None or c.metric == metric)
             and (group is None or c.group == group)]
    assert len(found) == 1, (paper, model, metric, group, found)
    return found[0]


def _as_printed(text: str) -> str:
    """The paper's text as the quotes hold it: whitespace flattened, the extraction's ``\\%`` and ``\\rightarrow``
    as the printed glyphs, and a word the PDF broke across lines ("charac-\\n\\nteristics") whole again."""
    text = re.sub(r"(?<=[a-z])-\n+(?=[a-z])", "", text).replace("\\%", "%")
    return glyphs(flat(text))


def test_prose_numbers_are_the_papers_sentences(cells: list[published.Cell], papers: dict[str, str]) -> None:
    prose = [c for c in cells if c.table == "text"]
    assert {(c.paper, c.group, c.metric): c.value for c in prose} == PROSE
    printed = {p: _as_printed(t) for p, t in papers.items()}
    for c in prose:
        # the sentence is the paper's, whole (it starts a sentence and ends one) and prints the value
        assert c.quote in printed[c.paper], (c.key, c.quote[:80])
        assert c.quote[0].isupper() and c.quote.endswith("."), c.quote
        assert published._in_quote(c.value, c.quote) and c.note.startswith("in the prose"), c
        assert (c.model, c.condition, c.variant) == (published.ANY,) * 3 or c.model not in (published.ANY,)
    bounds = [c for c in prose if c.is_bound]
    assert {c.group for c in bounds} == {"category=Musical Texture", "category=Structure", "category=Lyrics"}
    assert all("less than 3.5%" in c.quote for c in bounds)
    # the difficulty shares are a partition of the questions
    shares = [float(_prose(cells, "hummusqa", metric="items_share", group=f"difficulty={d}").value)
              for d in ("Low", "Medium", "High")]
    assert sum(shares) == pytest.approx(100.0)
    # "roughly 50%" is Table 1's text-only cell at high difficulty, 50.0 ± 2.0
    text_only = _prose(cells, "hummusqa", model="gemini-2.5-flash")
    table1 = [c for c in published.cells_of("hummusqa/table1", cells) if c.summary_key == text_only.summary_key]
    assert [(c.value, c.sd) for c in table1] == [("50.0", "2.0")]


def _differences(cells: list[published.Cell], skip: set[str]) -> dict[tuple[str, ...], float]:
    """correct − random per (protocol, dataset, model, metric) of the free-form Tables 2, 10 and 11, as printed."""
    by = {(c.protocol, c.dataset, c.model, c.metric, c.condition): c.number for c in cells
          if c.key in ("factual/table2", "factual/table10", "factual/table11") and c.metric not in skip}
    return {k[:4]: v - by[(*k[:4], "random")] for k, v in by.items() if k[4] == "correct" and (*k[:4], "random") in by}


def test_the_prose_differences_are_the_tables_largest_and_ciders_disagrees(cells: list[published.Cell]) -> None:
    # "For all metrics except CLAPText, the maximum difference between the correct and random baseline score in any
    # experiment is CIDEr with 0.1106": the tables' largest is CIDEr, SALMONN on MagnaTagATune, but 0.1160
    diffs = _differences(cells, {"claptext"})
    top = max(diffs, key=diffs.get)
    cider = _prose(cells, "factual", metric="cider")
    assert top == (cider.protocol, cider.dataset, cider.model, cider.metric) == ("table2-mtt", "musicqa-mtt",
                                                                                 "salmonn", "cider")
    assert cider.condition == "correct-random"
    assert round(diffs[top], 4) == 0.1160 and cider.number == 0.1106 and "0.1160" in cider.note
    # "Excluding CIDEr, the score with the second largest discrepancy … is ROGUE, with a max margin of 0.03472":
    # ROUGE, SALMONN on Jamendo, 0.4184 − 0.3836 = 0.0348, which 0.03472 is within the tables' rounding of
    diffs = _differences(cells, {"claptext", "cider"})
    top = max(diffs, key=diffs.get)
    rouge = _prose(cells, "factual", metric="rouge")
    assert top == (rouge.protocol, rouge.dataset, rouge.model, rouge.metric)
    assert abs(diffs[top] - rouge.number) <= 1e-4 + 1e-9
