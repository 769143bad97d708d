"""Versioned prompt templates and their answer parsers."""

from __future__ import annotations

import json

import pytest

from evalcore.llm.client import parse_json_output, response_format
from evalcore.llm.prompts import (ADVERSARIAL, EXTRACTION_RULES, LABEL_EXTRACTION, MCQ_MATCH, MCQ_MATCH_JSON, PARAPHRASE,
                                  TEMPLATES, McqChoice, parse_labels, parse_letter)


def test_templates_render_and_are_versioned():
    assert set(TEMPLATES) == {"label_extraction", "label_extraction_paper", "mcq_match", "mcq_match_json", "paraphrase",
                              "adversarial"}
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
    # the article "a" alone (an answer cut after its first word) is not option A; enclosed or cued it is
    assert [parse_letter(s) for s in ["a", "a.", "(a)", "option a", "A"]] == [None, None, "A", "A", "A"]


def test_mcq_json_template_schema_and_validation():
    user = MCQ_MATCH_JSON.render(question="Q?", a="x", b="y", c="z", d="w", response="y")[1]["content"]
    assert user.endswith("JSON:") and "D. w" in user and "JSON object" in MCQ_MATCH_JSON.system
    rf = response_format(McqChoice, "json_schema")
    schema = rf["json_schema"]["schema"]
    assert rf["json_schema"]["strict"] and schema["additionalProperties"] is False
    assert schema["required"] == ["choice"] and schema["properties"]["choice"]["enum"] == ["A", "B", "C", "D", "none"]
    assert response_format(McqChoice, "json_object") == {"type": "json_object"}
    assert response_format(McqChoice, "prompt") is None
    assert parse_json_output('{"choice": "B"}', McqChoice) == {"choice": "B"}
    assert parse_json_output('```json\n{"choice": "none"}\n```', McqChoice) == {"choice": "none"}
    for bad in ('{"choice": "E"}', '{"choice": "A", "why": "x"}', "B", '{"choice": "A"', ""):
        with pytest.raises(ValueError):
            parse_json_output(bad, McqChoice)
    json.dumps(rf)  # serialisable as a request field
