"""The paper configs run the papers' models as the papers describe them, held to the papers' own sentences:
the factual paper's SALMONN is the Vicuna-7B one, and gemini-2.5-flash has room for its thinking tokens."""

from __future__ import annotations

import pathlib

import yaml

from paper_text import FACTUAL, flat, paper

REPO = pathlib.Path(__file__).resolve().parents[1]


def _models(pattern: str) -> list[tuple[str, dict]]:
    return [(p.name, m) for p in sorted((REPO / "configs" / "paper").glob(pattern))
            for m in yaml.safe_load(p.read_text())["models"]]


def test_the_factual_papers_salmonn_is_the_vicuna_7b_one() -> None:
    assert "SALMONN is derived from the Vicuna-7B fine-tuned variant of LLaMA-2 7B" in flat(paper(FACTUAL))
    found = [(name, m["params"]["checkpoint"]) for name, m in _models("factual-*.yaml") if m["name"] == "salmonn"]
    assert len(found) >= 5
    assert all(ck.rstrip("/").endswith("salmonn-7b") for _, ck in found), found


def test_gemini_has_room_for_its_thinking_tokens() -> None:
    found = [(name, m["params"]) for name, m in _models("hummusqa-*.yaml") if m["name"] == "gemini-2.5-flash"]
    assert found and all(p.get("max_tokens", 256) >= 8192 for _, p in found), found
