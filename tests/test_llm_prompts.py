"""Versioned prompt templates and their answer parsers."""

from __future__ import annotations

from evalcore.llm.prompts import (ADVERSARIAL, EXTRACTION_RULES, LABEL_EXTRACTION, MCQ_MATCH, PARAPHRASE,
                                  TEMPLATES, parse_labels, parse_letter)


def test_templates_render_and_are_versioned():
    assert set(TEMPLATES) == {"label_extraction", "mcq_match", "paraphrase", "adversarial"}
    assert len(EXTRACTION_RULES) == 8 and all(r in LABEL_EXTRACTION.system for r in EXTRACTION_RULES)
    msgs = LABEL_EXTRACTION.render(category="instrument", vocabulary="piano, violin", text="A solo piano.")
    assert [m["role"] for m in msgs] == ["system", "user"] and "A solo piano." in msgs[1]["content"]
    mcq = MCQ_MATCH.render(question="Q?", a="x", b="y", c="z", d="w", response="I pick y")
    assert "D. w" in mcq[1]["content"] and "none" in mcq[0]["content"]
    assert "same meaning" in PARAPHRASE.system and "few edits" in ADVERSARIAL.system
    assert LABEL_EXTRACTION.tag == "label_extraction@1"


def test_parsers():
    assert parse_labels("Piano, violin, piano, kazoo", ["piano", "violin"]) == ["piano", "violin"]
    assert parse_labels("", ["piano"]) == []
    assert [parse_letter(s) for s in ["B", " c.", "Option D", "none", "A or B", ""]] == ["B", "C", "D", None, None, None]
