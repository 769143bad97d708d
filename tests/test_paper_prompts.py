"""The factual paper's prompts, word for word: each named template, its placeholders filled as the paper prints
them, is in the paper's text (only whitespace normalised: :func:`paper_text.flat`, or :func:`paper_text.squash`
where the extraction split the printed prompt with tabs), and the paper configs use these templates.

The paper prints no filled vocabulary list ("Among {*}", "{all genres}", "{all composers}" only), so what case the
authors filled ``{vocabulary}`` with cannot be read off it; the configs keep the canonical lower-case labels.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from evalcore.judges.llm_judges import EXTRACTION_PROMPTS
from evalcore.llm.prompts import LABEL_EXTRACTION, LABEL_EXTRACTION_PAPER, PAPER_EXTRACTION_RULES
from evalcore.datasets.factual_formats import BINARY_QUESTIONS, TRUE_FALSE_QUESTIONS
from evalcore.protocols.factual_prompts import PAPER_PROMPTS, PROMPTS
from evalcore.vocab.labels import family as task_family
from paper_text import flat, glyphs, paper, squash

REPO = Path(__file__).resolve().parents[1]
FACTUAL_CONFIGS = sorted((REPO / "configs" / "paper").glob("factual-*.yaml"))
# where the paper prints each task's vocabulary placeholder: Table 5 "{all instruments}", Table 4 "{*}" (Table 6's
# "{all genres}" is split by tabs in the extracted text), Table 12 "{all composers}"
SHOWN = {"instrument": "{all instruments}", "genre": "{*}", "composer": "{all composers}"}


@pytest.fixture(scope="module")
def text() -> str:
    return flat(paper())


def appendix_b1_rules(raw: str) -> list[str]:
    """The numbered rules of App. B.1 as the paper's text prints them, in order: every "- N. **…" line from the
    section's heading to B.2's, whatever lies between (rules 6-8 come after a page break, below Table 5)."""
    section = raw[raw.index("B.1 KEYWORD EXTRACTION RULES"):raw.index("B.2 RESULTS")]
    return [glyphs(flat(m)) for m in re.findall(r"^- (\d+\. \*\*.*)$", section, re.MULTILINE)]


def test_extraction_prompt_is_appendix_b1_word_for_word(text: str) -> None:
    raw = paper()
    printed = appendix_b1_rules(raw)
    assert [r.split(".")[0] for r in printed] == [str(n) for n in range(1, 9)]  # eight rules, 6-8 after Table 5
    assert raw.index("Table 5:") < raw.index("- 6. **Empty case:**")
    lines = LABEL_EXTRACTION_PAPER.system.split("\n")
    assert flat(lines[0]) in text and lines[0].startswith("We define the following rules")  # the opening sentence
    assert lines[1:] == list(PAPER_EXTRACTION_RULES) == printed  # all eight, in order, nothing added
    assert "Bach\" → \"Bach\"" in LABEL_EXTRACTION_PAPER.system  # rule 7, which §4.1 relies on for composers
    assert EXTRACTION_PROMPTS["paper"] is LABEL_EXTRACTION_PAPER
    # evalcore's own wording is kept under its own name, and is not the paper's
    assert EXTRACTION_PROMPTS["evalcore"] is LABEL_EXTRACTION
    assert LABEL_EXTRACTION.system.split("\n")[1] not in text


@pytest.mark.parametrize("task,variant", [(t, v) for t, vs in PAPER_PROMPTS.items() for v in vs])
def test_question_prompts_are_the_papers(text: str, task: str, variant: str) -> None:
    filled = PAPER_PROMPTS[task][variant].replace("{vocabulary}", SHOWN[task])
    assert f'"{filled}"' in text  # quotes included: the prompt ends where the paper's does


def test_evalcore_question_mark_is_ours(text: str) -> None:
    for variant in ("what-is", "infer"):
        assert PROMPTS["genre"][variant] == PAPER_PROMPTS["genre"][variant] + "?"
        assert f'"{PROMPTS["genre"][variant]}"' not in text


def test_binary_choice_prompts_are_the_papers(text: str) -> None:
    # §B.2 names the two options "A and B" …
    assert '"Between A and B, ..."' in text
    for family, shown in (("genre", "{two genres}"), ("composer", "{two composers}")):
        template = BINARY_QUESTIONS[family]
        assert template.format(a="A", b="B").startswith("Between A and B, ")
        # … and Tables 7 and 13 print the rest after "{two genres}" / "{two composers}"
        printed = f'Between {shown}{template.split("{b}", 1)[1]}"'
        found = printed in text if family == "genre" else squash(printed) in squash(text)  # Table 13 is tab-split
        assert found, printed


def test_true_false_prompt_is_the_papers(text: str) -> None:
    assert "Prompt: " + TRUE_FALSE_QUESTIONS["instrument"].format(label="{instrument}") + " Metric" in text


@pytest.mark.parametrize("path", FACTUAL_CONFIGS, ids=[p.stem for p in FACTUAL_CONFIGS])
def test_paper_configs_use_the_paper_templates(path: Path) -> None:
    cfg = yaml.safe_load(path.read_text())
    for protocol in cfg["protocols"]:
        task = next((d["params"].get("task") for d in cfg["datasets"]
                     if d["name"] in protocol.get("datasets", [d["name"] for d in cfg["datasets"]])), None)
        for name, template in (protocol.get("variants") or {}).items():
            assert template == PAPER_PROMPTS[task_family(task)][name], (protocol["name"], name)
        judge = protocol.get("judge") or {}
        if judge.get("kind") == "llm_extractor":
            assert judge["params"]["prompt"] == "paper", protocol["name"]
