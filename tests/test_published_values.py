"""configs/paper/published.csv against the papers' own text, and docs/reproduce.md against the file.

The papers' text lies beside the clone (``../shared/papers``, or ``EVALCORE_PAPERS_DIR``); the tests that read it
skip, naming the path, without it. The rest (counts, validation, the page) run everywhere.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from evalcore.reports import published
from evalcore.reports.published import PublishedError, read

PAPERS_ENV = "EVALCORE_PAPERS_DIR"
PAPERS_DIR = Path(os.environ.get(PAPERS_ENV) or Path(__file__).resolve().parents[2] / "shared" / "papers")
PAPER_FILES = {"factual": "factual-and-musical-metrics-for-music-lms.txt", "hummusqa": "hummusqa-benchmark.txt",
               "muchomusic": "muchomusic-benchmark.txt"}

# Numeric cells per table, counted by hand in the papers:
EXPECTED_COUNTS = {
    "factual/table2": 126,   # MusicQA-Jamendo 10 rows (4 models x correct/random, paraphrase, adversarial) x 7
                             # metrics + MagnaTagATune 8 rows (no MU-LLaMA) x 7
    "factual/table4": 72,    # 4 prompts x 3 metric rows (P, R, F1) x 6 columns (3 models x correct/random)
    "factual/table5": 72,    # 4 prompts x 3 x 6
    "factual/table6": 72,    # 4 prompts x 3 x 6
    "factual/table7": 9,     # 3 metric rows x 3 models
    "factual/table8": 24,    # 4 metric rows (P, R, F1, Accuracy) x 6 columns
    "factual/table9": 24,    # 4 x 6
    "factual/table10": 60,   # 10 rows (4 models x correct/random, skyline, adversarial) x 6 metrics (no CLAPText)
    "factual/table11": 48,   # 8 rows (no MU-LLaMA) x 6
    "factual/table12": 72,   # 4 prompts x 3 x 6
    "factual/table13": 9,    # 3 x 3
    "factual/table14": 54,   # 3 prompts x 3 x 6
    "factual/text": 3,       # the prose: CIDEr's 0.1106, ROUGE's 0.03472, chance 0.125
    "hummusqa/table1": 56,   # 7 rows (6 models, gemini text-only) x (4 accuracy ± SD + 4 consistency)
    "hummusqa/table2": 9,    # 3 models x real / noise / silence (accuracy ± SD)
    "hummusqa/text": 13,     # the prose: 320 questions, 108 tracks, 6 category and 3 difficulty shares, chance 25 %,
                             # text-only "roughly 50%" on high difficulty
    "muchomusic/text": 5,    # the prose: Qwen-Audio's 51.4 %, 44 % reasoning, 858 + 329 questions, 2,091 pairs
    "muchomusic/results": 24,  # the results table (not in the text at hand): 6 rows (5 models, random guessing)
                               # x (accuracy all, Knowledge, Reasoning; IFR)
}
#: tables the text at hand does not print, and where their values come from (checked in their own test)
NOT_IN_TEXT = {"muchomusic/results": "the authors' project page (RESULTS_IMAGE)"}
#: captioned tables with no numeric cell, and why
NO_NUMBERS = {"factual/table1": "a MusicQA sample and its rewrites (text only)",
              "factual/table3": "an extraction example: its caption's precision, recall and F1 are of that one answer "
                                "(tests/test_paper_definitions.py), not a result",
              "hummusqa/table3": "representative questions (text only)",
              "hummusqa/table4": "model descriptions: context lengths and audio limits are specifications, not results"}

#: cells whose P, R and F1 do not agree (F1 != 2PR/(P+R) to the printed decimals), each noted in the file
INCONSISTENT_PRF = {("factual", "table14", "genre-same-node", "fma-small", "mu-llama", "correct", "infer", "all",
                     "micro")}

#: each table's text in the paper: (first anchor, end anchor, decimals its cells print); every number with that
#: many decimals between the anchors is one of the table's values or SDs (Table 3's are in its caption: sampled)
SPANS = {
    "factual/table2": ("Table 2:", "to CLAPText are text pairs", 4),
    "factual/table4": ("Table 4:", "4.3 RESULTS", 3),
    "factual/table5": ("Table 5:", "6. **Empty case:**", 3),
    "factual/table6": ("Table 6:", "Table 7:", 3),
    "factual/table7": ("Table 7:", "basis. For chunked models", 3),
    "factual/table8": ("Table 8:", "Table 9:", 3),
    "factual/table9": ("Table 9:", "Table 10:", 3),
    "factual/table10": ("Table 10:", "periments on the whole MusicQA", 4),
    "factual/table11": ("Table 11:", "Table 12:", 4),
    "factual/table12": ("Table 12:", "C.3 SAME NODE", 3),
    "factual/table13": ("Table 13:", "D THE USE OF", 3),
    "factual/table14": ("Table 14:", "\0end", 3),
    "hummusqa/table1": ("Model\tAccuracy with SD (%)\t\t\t\tConsistency", "Table 1:", 1),
    "hummusqa/table2": ("Model\tAccuracy with SD (%)\t\t\n\tReal", "Table 2:", 1),
}


@dataclass(frozen=True)
class Sample:
    """One cell of the file and where the paper prints it: ``anchors`` found one after another in the paper's text
    (the last one the row's label), then ``col``, the cell's place among the numbers after the label on its line."""

    paper: str
    table: str
    model: str
    condition: str
    variant: str
    metric: str
    anchors: tuple[str, ...]
    col: int
    dataset: str | None = None
    group: str = "all"


def _f(table: str, model: str, condition: str, variant: str, metric: str, anchors: tuple[str, ...], col: int,
       dataset: str | None = None) -> Sample:
    return Sample("factual", table, model, condition, variant, metric, anchors, col, dataset)


def _h(table: str, model: str, condition: str, variant: str, metric: str, anchors: tuple[str, ...], col: int,
       group: str = "all") -> Sample:
    return Sample("hummusqa", table, model, condition, variant, metric, anchors, col, None, group)


JAM, MTT = ("Table 2:", "MusicQA-Jamendo"), ("Table 2:", "MusicQA-M\tagnaTagATu")
SAMPLES = [
    _f("table2", "ltu-as", "correct", "default", "bleu", (*JAM, "LTU-AS\tCorrect"), 0, "musicqa-jamendo"),
    _f("table2", "salmonn", "random", "default", "bertscore", (*JAM, "SALMONN", "Random"), 4, "musicqa-jamendo"),
    _f("table2", "adversarial", "correct", "default", "claptext", (*JAM, "\tAdversarial\t"), 6, "musicqa-jamendo"),
    _f("table2", "ltu-as", "correct", "default", "bleu4", (*MTT, "LTU-AS\tCorrect"), 1, "musicqa-mtt"),
    _f("table2", "llama-adapter", "random", "default", "cider", (*MTT, "Adapter\tRandom"), 5, "musicqa-mtt"),
    _f("table2", "adversarial", "correct", "default", "claptext", (*MTT, "\tAdversarial\t"), 6, "musicqa-mtt"),
    _f("table4", "ltu-as", "correct", "used", "precision_micro",
       ("Table 4:", 'Prompt: "Which instruments are used', "Precision"), 0),
    _f("table4", "llama-adapter", "random", "fall-under", "recall_micro",
       ("Table 4:", 'Prompt: "What genre does this piece of music fa', "Recall"), 3),
    _f("table4", "salmonn", "random", "among", "f1_micro",
       ("Table 4:", 'Prompt: "Among {*}, what is the genre', "F1-Score"), 5),
    _f("table5", "ltu-as", "correct", "used", "precision_micro",
       ("Table 5:", 'Prompt: "Which instruments are used', "Precision"), 0),
    _f("table5", "llama-adapter", "correct", "instrumentation", "recall_micro",
       ("Table 5:", 'Prompt: "Which instruments constitute', "Recall"), 4),
    _f("table5", "mu-llama", "correct", "playing", "f1_micro",
       ("Table 5:", 'Prompt: "What instruments are playing', "F1-Score"), 2),
    _f("table5", "llama-adapter", "random", "among", "f1_micro",
       ("Table 5:", 'Prompt: "Among {all instruments}', "F1-Score"), 5),
    _f("table6", "mu-llama", "correct", "what-is", "precision_micro",
       ("Table 6:", 'Prompt: "What is the genre of this song"', "Precision"), 0),
    _f("table6", "salmonn", "correct", "infer", "recall_micro", ("Table 6:", "you infer a", "Recall"), 4),
    _f("table6", "mu-llama", "random", "fall-under", "f1_micro", ("Table 6:", "piece of n", "F1-Score"), 1),
    _f("table6", "salmonn", "random", "among", "f1_micro", ("Table 6:", "all genres}", "F1-Score"), 5),
    _f("table7", "mu-llama", "correct", "default", "precision_micro", ("Table 7:", "Precision"), 0),
    _f("table7", "llama-adapter", "correct", "default", "recall_micro", ("Table 7:", "Recall"), 1),
    _f("table7", "salmonn", "correct", "default", "f1_micro", ("Table 7:", "F1-Score"), 2),
    _f("table8", "ltu-as", "correct", "default", "precision_any", ("Table 8:", "Precision"), 0),
    _f("table8", "mu-llama", "random", "default", "recall_any", ("Table 8:", "Recall"), 3),
    _f("table8", "llama-adapter", "correct", "default", "f1_any", ("Table 8:", "F1-Score"), 4),
    _f("table8", "llama-adapter", "random", "default", "jaccard_any", ("Table 8:", "Accuracy"), 5),
    _f("table9", "ltu-as", "correct", "default", "precision_majority", ("Table 9:", "Precision"), 0),
    _f("table9", "mu-llama", "correct", "default", "recall_majority", ("Table 9:", "Recall"), 2),
    _f("table9", "llama-adapter", "random", "default", "jaccard_majority", ("Table 9:", "Accuracy"), 5),
    # Table 10 prints LTU-AS's and SALMONN's correct and random rows on one line, the pairs side by side
    _f("table10", "ltu-as", "correct", "default", "bleu", ("Table 10:", "LTU-AS\tCorrect Random"), 0),
    _f("table10", "ltu-as", "random", "default", "bleu4", ("Table 10:", "LTU-AS\tCorrect Random"), 3),
    _f("table10", "mu-llama", "correct", "default", "bertscore", ("Table 10:", "MU-LLaMA\tCorrect"), 4),
    _f("table10", "salmonn", "random", "default", "cider", ("Table 10:", "SALMONN\tCorrect Random"), 11),
    _f("table10", "paraphrase", "correct", "default", "bleu", ("Table 10:", "Rewrite\tSkyline"), 0),
    _f("table10", "adversarial", "correct", "default", "cider", ("Table 10:", "\tAdversarial\t"), 5),
    _f("table11", "ltu-as", "correct", "default", "bleu", ("Table 11:", "LTU-AS\tCorrect"), 0),
    _f("table11", "salmonn", "random", "default", "meteor", ("Table 11:", "SALMONN\tCorrect", "Random"), 2),
    _f("table11", "adversarial", "correct", "default", "cider", ("Table 11:", "\tAdversarial\t"), 5),
    _f("table12", "ltu-as", "correct", "resemble", "precision_micro",
       ("Table 12:", "resemble the most?", "Precision"), 0),
    _f("table12", "llama-adapter", "correct", "closely", "recall_micro",
       ("Table 12:", "most closely resemble", "Recall"), 4),
    _f("table12", "mu-llama", "correct", "sound-like", "precision_micro",
       ("Table 12:", "work does this sound like", "Precision"), 2),
    _f("table12", "llama-adapter", "random", "among", "f1_micro",
       ("Table 12:", "Among {all composers}", "F1-Score"), 5),
    _f("table13", "ltu-as", "correct", "default", "precision_micro", ("Table 13:", "Precision"), 0),
    _f("table13", "mu-llama", "correct", "default", "recall_micro", ("Table 13:", "Recall"), 1),
    _f("table13", "llama-adapter", "correct", "default", "f1_micro", ("Table 13:", "F1-Score"), 2),
    # Table 14's text is one line with the page's line numbers in it and some cells moved before their row's label
    # (each prompt's "Precision" row, the last prompt's recall row): its samples are cells that follow their label
    _f("table14", "mu-llama", "correct", "what-is", "precision_micro",
       ("Table 14:", 'Prompt: "What is the genre of this song"', "Precision"), 0),
    _f("table14", "llama-adapter", "correct", "what-is", "precision_micro",
       ("Table 14:", 'Prompt: "What is the genre of this song"', "Precision"), 1),
    _f("table14", "mu-llama", "correct", "what-is", "recall_micro",
       ("Table 14:", 'Prompt: "What is the genre of this song"', "Recall"), 0),
    _f("table14", "mu-llama", "correct", "infer", "precision_micro",
       ("Table 14:", 'Prompt: "What can you infer', "Precision"), 0),
    _f("table14", "salmonn", "correct", "fall-under", "f1_micro",
       ("Table 14:", 'Prompt: "What genre does this piece', "F1-Score"), 0),
    _f("table14", "salmonn", "random", "fall-under", "f1_micro",
       ("Table 14:", 'Prompt: "What genre does this piece', "F1-Score"), 1),
    _h("table1", "qwen2.5-omni-7b", "correct", "hummusqa-qwen-omni", "accuracy",
       ("Consistency (%)", "qwen2.5-omni-7b (Xu et al., 2025)"), 0),
    _h("table1", "audio-flamingo-3", "correct", "hummusqa-plain", "accuracy",
       ("Consistency (%)", "audio-flamingo-3 (Goel et al., 2025)"), 2, "difficulty=Medium"),
    _h("table1", "gpt-audio", "correct", "hummusqa-plain", "consistency",
       ("Consistency (%)", "gpt-audio (OpenAI, 2025b)"), 4),
    _h("table1", "gemini-2.5-flash", "text_only", "hummusqa-gemini", "accuracy",
       ("Consistency (%)", "gemini-2.5-flash (<i>text-only</i>)"), 3, "difficulty=High"),
    _h("table1", "gemini-2.5-flash", "text_only", "hummusqa-gemini", "consistency",
       ("Consistency (%)", "gemini-2.5-flash (<i>text-only</i>)"), 7, "difficulty=High"),
    _h("table2", "qwen2.5-omni-7b", "correct", "hummusqa-qwen-omni", "accuracy",
       ("\tReal\tNoise\tSilence", "qwen2.5-omni-7b"), 0),
    _h("table2", "music-flamingo", "noise", "hummusqa-plain", "accuracy",
       ("\tReal\tNoise\tSilence", "musicflamingo"), 1),
    _h("table2", "gemini-2.5-flash", "silence", "hummusqa-gemini", "accuracy",
       ("\tReal\tNoise\tSilence", "gemini-2.5-flash"), 2),
    Sample("muchomusic", "text", "qwen-audio", "correct", "muchomusic", "accuracy",
           ("Among these, Qwen-Audio stands out with a score of",), 0),
]


@pytest.fixture(scope="module")
def cells() -> list[published.Cell]:
    return read()


@pytest.fixture(scope="module")
def papers() -> dict[str, str]:
    paths = {p: PAPERS_DIR / f for p, f in PAPER_FILES.items()}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        pytest.skip(f"the papers' text not found at {missing[0]} (set {PAPERS_ENV})")
    return {p: path.read_text(encoding="utf-8") for p, path in paths.items()}


def _cell(cells: list[published.Cell], s: Sample) -> published.Cell:
    found = [c for c in cells if (c.paper, c.table, c.model, c.condition, c.variant, c.metric, c.group)
             == (s.paper, s.table, s.model, s.condition, s.variant, s.metric, s.group)
             and (s.dataset is None or c.dataset == s.dataset)]
    assert len(found) == 1, f"{len(found)} cells match the sample {s.paper}/{s.table} {s.model} {s.metric}"
    return found[0]


def _after(text: str, anchors: tuple[str, ...]) -> str:
    """The rest of the line after the last anchor, each anchor searched after the one before."""
    pos = 0
    for a in anchors:
        i = text.find(a, pos)
        assert i >= 0, f"anchor {a[:60]!r} not found in the paper after offset {pos}"
        pos = i + len(a)
    end = text.find("\n", pos)
    return text[pos:end if end >= 0 else len(text)]


def _decimals(value: str) -> int:
    return len(value.partition(".")[2])


def _tokens(line: str, k: int) -> list[str]:
    """The numbers with ``k`` decimals of ``line``, each with its "± sd" where printed; numbers printed without a
    space between them ("0.0440.1150.026") come apart."""
    num = rf"\d+\.\d{{{k}}}" if k else r"\d+"
    return re.findall(rf"{num}(?: ± \d+\.\d+)?", line)


def test_the_file_validates_and_counts_per_table_match_the_papers(cells: list[published.Cell]) -> None:
    counts = Counter(c.key for c in cells)
    assert dict(counts) == EXPECTED_COUNTS
    assert published.table_keys(cells) == list(EXPECTED_COUNTS)  # file order: paper, then table number
    assert [c.value for c in published.cells_of("factual/table13", cells)][:3] == ["0.496", "0.570", "0.463"]


def test_sampled_cells_are_printed_in_their_row_and_column(cells: list[published.Cell], papers: dict[str, str]) -> None:
    for s in SAMPLES:
        c = _cell(cells, s)
        want = c.value + (f" ± {c.sd}" if c.sd else "")
        got = _tokens(_after(papers[s.paper], s.anchors), _decimals(c.value))
        assert s.col < len(got) and got[s.col] == want, (
            f"{c.key} {c.model}/{c.condition}/{c.variant}/{c.group}/{c.metric}: the file has {want!r}, the paper "
            f"prints {got[s.col] if s.col < len(got) else None!r} at place {s.col} after {s.anchors[-1][:40]!r}")


def test_samples_cover_every_table_its_first_and_last_cell(cells: list[published.Cell]) -> None:
    # the prose (``text``) is checked cell by cell against its sentence (tests/test_published_prose.py)
    sampled = {_cell(cells, s) for s in SAMPLES}
    for key in (k for k in published.table_keys(cells) if k not in NOT_IN_TEXT and not k.endswith("/text")):
        tcells = published.cells_of(key, cells)
        mine = [c for c in tcells if c in sampled]
        assert len(mine) >= min(3, len(tcells)), f"{key}: {len(mine)} samples"
        assert tcells[0] in sampled and tcells[-1] in sampled, f"{key}: first or last cell not sampled"


def test_every_value_of_a_table_is_printed_in_that_table(cells: list[published.Cell], papers: dict[str, str]) -> None:
    # the numbers printed in each table's text, as a multiset, are exactly the file's values (and SDs) of it
    assert set(SPANS) == {k for k in EXPECTED_COUNTS if not k.endswith("/text")} - set(NOT_IN_TEXT)
    for key, (start, end, k) in SPANS.items():
        text = papers[key.split("/")[0]]
        a = text.index(start)
        b = text.find(end, a) if end != "\0end" else len(text)
        assert b > a, f"{key}: end anchor {end!r} not found after {start!r}"
        printed = Counter(re.findall(rf"(?<![A-Za-z-])\d+\.\d{{{k}}}", text[a:b]))  # not "qwen2.5", "gemini-2.5"
        mine = Counter(v for c in published.cells_of(key, cells) for v in (c.value, c.sd) if v)
        assert printed == mine, (f"{key}: only in the paper {dict(printed - mine)}, "
                                 f"only in the file {dict(mine - printed)}")


def test_every_captioned_table_has_rows(cells: list[published.Cell], papers: dict[str, str]) -> None:
    captioned = {f"{p}/table{n}" for p, text in papers.items() for n in re.findall(r"\bTable (\d+):", text)}
    in_file = {c.key for c in cells if c.table != "text" and c.key not in NOT_IN_TEXT}
    assert captioned - set(NO_NUMBERS) == in_file
    assert set(NO_NUMBERS) <= captioned
    assert not re.search(r"\bTable \d", papers["muchomusic"])  # its text numbers no table: its value is "text"


def test_printed_f1_is_the_harmonic_mean_of_printed_precision_and_recall(cells: list[published.Cell]) -> None:
    triples: dict[tuple[str, ...], dict[str, published.Cell]] = defaultdict(dict)
    for c in (c for c in cells if c.table != "text"):  # the prose's chance level is one number, no triple
        stem, _, kind = c.metric.partition("_")
        if stem in ("precision", "recall", "f1"):
            triples[(c.paper, c.table, c.protocol, c.dataset, c.model, c.condition, c.variant, c.group, kind)][stem] = c
    assert len(triples) == 132  # Tables 4-6 and 12's 24 each, 7 and 13's 3, 8 and 9's 6, 14's 18
    off = set()
    for key, t in triples.items():
        assert set(t) == {"precision", "recall", "f1"}, key
        half = {s: 0.5 * 10 ** -_decimals(c.value) for s, c in t.items()}
        p, r, f = (t[s].number for s in ("precision", "recall", "f1"))
        lo = 2 * (p - half["precision"]) * (r - half["recall"]) / (p + r - half["precision"] - half["recall"])
        hi = 2 * (p + half["precision"]) * (r + half["recall"]) / (p + r + half["precision"] + half["recall"])
        if not lo - half["f1"] <= f <= hi + half["f1"]:
            off.add(key)
            assert any(c.note for c in t.values()), f"{key}: P, R, F1 disagree and the file says nothing"
    assert off == INCONSISTENT_PRF


def test_validation_names_the_problem_briefly(cells: list[published.Cell]) -> None:
    c = cells[0]
    for bad, words in ((replace(c, value="45.3 ± 1.2"), "value '45.3 ± 1.2' is not a number"),
                       (replace(c, model=""), "empty model"), (replace(c, sd="n/a"), "sd 'n/a' is not a number"),
                       (replace(c, paper="other"), "paper 'other' is not one of"),
                       (replace(c, table="Table 2"), "table 'Table 2' is not")):
        with pytest.raises(PublishedError, match=words):
            published.validate([bad])
    with pytest.raises(PublishedError, match="the same cell as line 2"):
        published.validate([c, c])
    with pytest.raises(PublishedError) as e:
        published.validate([replace(c, value=f"x{i}" * 100, metric=f"m{i}") for i in range(40)])
    assert len(str(e.value)) < 1000 and "(and 35 more)" in str(e.value)


def test_reading_checks_the_columns(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    f.write_text("paper,table,value\nfactual,table2,0.1\n", encoding="utf-8")
    with pytest.raises(PublishedError, match="columns"):
        read(f)


def test_a_file_of_the_format_before_quote_still_reads(cells: list[published.Cell], tmp_path: Path) -> None:
    """The 13 columns without ``quote`` (a copy of the file before it, or another project's values): read, every
    quote empty, a prose cell without its sentence allowed; rows that leave the trailing quote out read too."""
    legacy = ",".join(published.LEGACY_COLUMNS)
    old = tmp_path / "old.csv"
    old.write_text(f"{legacy}\nmuchomusic,text,muchomusic,muchomusic,qwen-audio,correct,muchomusic,all,accuracy,"
                   "51.4,,%,in the prose\n", encoding="utf-8")
    (cell,) = read(old)
    assert cell.value == "51.4" and cell.quote == ""
    new = tmp_path / "new.csv"  # today's header, a row written with 13 fields (appended by the format before)
    new.write_text(",".join(published.COLUMNS) + "\nfactual,table2,table2-jamendo,musicqa-jamendo,ltu-as,correct,"
                   "default,all,bleu,0.2487,,,\n", encoding="utf-8")
    assert read(new)[0].quote == "" and read(new)[0].value == "0.2487"
    with pytest.raises(PublishedError, match="a number in the prose without its sentence"):
        published.validate([replace(c, quote="") for c in cells if c.table == "text"][:1])
    with pytest.raises(PublishedError, match="the quote does not print the value '0.1106'"):
        published.validate([replace(c, quote="It is 0.11060.") for c in cells if c.value == "0.1106"])


def test_docs_reproduce_md_is_generated_from_the_file(cells: list[published.Cell]) -> None:
    text = published.REPRODUCE_MD.read_text(encoding="utf-8")
    assert published.render_doc(text, cells) == text, "run: python -m evalcore.reports.published --write"
    assert published.main(["--check"]) == 0


def test_render_doc_rewrites_only_between_markers(cells: list[published.Cell], tmp_path: Path) -> None:
    blocks = "".join(f"before {p}\n<!-- published:begin {p} -->\nstale\n<!-- published:end {p} -->\nafter {p}\n"
                     for p in published.PAPERS)
    out = published.render_doc(blocks, cells)
    assert "stale" not in out and "| 0.2487 |" in out and "| qwen-audio [1] | 51.4 |" in out
    for p in published.PAPERS:
        assert f"before {p}\n<!-- published:begin {p} -->\nPublished values" in out
        assert f"<!-- published:end {p} -->\nafter {p}\n" in out
    with pytest.raises(PublishedError, match="hummusqa"):
        published.render_doc(blocks.replace("<!-- published:end hummusqa -->", ""), cells)
    doc = tmp_path / "reproduce.md"
    doc.write_text(blocks, encoding="utf-8")
    assert published.main(["--check", "--doc", str(doc)]) == 1
    assert published.main(["--write", "--doc", str(doc)]) == 0 and doc.read_text(encoding="utf-8") == out


# MuChoMusic's results table: the text at hand (tables lost in its extraction) prints none of it; the authors' project
# page prints it as an image, github.com/mulab-mir/muchomusic, branch "website", static/images/results.png ("Overview
# of Results"), transcribed row by row. The image has two versions: the one transcribed, last changed by e9d5ca2
# ("update images", 2 Aug 2024; the same file at the branch's head b057bc07e8b3591927961035b02f1d2793eb065e), and
# the repository's first commit's (cbdf41a, 19 Jul 2024), which prints other values in every model cell:
RESULTS_IMAGE = {  # model: (accuracy All, Knowledge, Reasoning, IFR All), in %
    "musilingo": ("21.1", "22.0", "19.2", "71.6"), "mu-llama": ("32.4", "32.3", "31.3", "79.4"),
    "m2ugen": ("42.9", "44.9", "41.2", "96.4"), "salmonn": ("41.8", "41.0", "43.3", "99.8"),
    "qwen-audio": ("51.4", "51.1", "51.0", "89.7"), "random-guessing": ("25.0", "25.0", "25.0", "100.0")}
RESULTS_IMAGE_FIRST = {  # cbdf41adf802f672923017f417210cf2a96992e8, the same file, transcribed the same way
    "musilingo": ("21.5", "20.3", "22.1", "70.4"), "mu-llama": ("31.8", "30.0", "32.2", "77.2"),
    "m2ugen": ("44.1", "41.5", "46.1", "97.4"), "salmonn": ("45.8", "46.5", "46.1", "98.0"),
    "qwen-audio": ("48.4", "47.3", "49.0", "89.9"), "random-guessing": ("25.0", "25.0", "25.0", "100.0")}


def test_muchomusic_results_table_is_the_projects_and_agrees_with_the_papers_prose(
        cells: list[published.Cell], papers: dict[str, str]) -> None:
    table = published.cells_of("muchomusic/results", cells)
    got = {(c.model, c.group, c.metric): c.value for c in table}
    keys = (("all", "accuracy"), ("dimension=knowledge", "accuracy"), ("dimension=reasoning", "accuracy"),
            ("all", "ifr"))
    assert got == {(m, *k): v for m, vs in RESULTS_IMAGE.items() for k, v in zip(keys, vs)}
    assert all(c.unit == "%" and c.condition == "correct" and c.variant == "muchomusic" and c.note for c in table)
    text = papers["muchomusic"]
    acc = {m: float(v[0]) for m, v in RESULTS_IMAGE.items()}
    # "Among these, Qwen-Audio stands out with a score of 51.4%": the best model, with the prose's number
    assert "Qwen-Audio stands out with a score of 51.4" in text and max(acc, key=acc.get) == "qwen-audio"
    assert published.cells_of("muchomusic/text", cells)[0].value == RESULTS_IMAGE["qwen-audio"][0]  # the 51.4
    # "with the exception of M2UGen, music-specialised models generally perform worse than general-audio ones, in
    # some cases performing only marginally above or even below random performance"
    assert "with the exception of M2UGen, music-specialised models generally perform worse than general-audio" in text
    assert acc["m2ugen"] > acc["salmonn"] and max(acc["musilingo"], acc["mu-llama"]) < acc["salmonn"]
    assert acc["musilingo"] < acc["random-guessing"] < acc["mu-llama"]


def test_the_results_image_version_is_named_and_the_other_versions_difference_stated(
        cells: list[published.Cell]) -> None:
    differ = [(m, i) for m in RESULTS_IMAGE for i in range(4) if RESULTS_IMAGE[m][i] != RESULTS_IMAGE_FIRST[m][i]]
    assert len(differ) == 20 and {m for m, _ in differ} == set(RESULTS_IMAGE) - {"random-guessing"}
    for c in published.cells_of("muchomusic/results", cells):
        if c.model == "random-guessing":  # the same in both versions
            continue
        assert "e9d5ca2" in c.note and "cbdf41a" in c.note, c
        # the first version's four values of the row, in the order of the table's columns
        assert f"{c.model} {', '.join(RESULTS_IMAGE_FIRST[c.model])}" in c.note, c
    # the prose's 51.4 is the transcribed version's: the first one's Qwen-Audio has 48.4
    assert RESULTS_IMAGE_FIRST["qwen-audio"][0] != published.cells_of("muchomusic/text", cells)[0].value
