"""``evalcore score mcq|factual`` are faces of the scoring stage: their per-item scores come from the pipeline's
``merge_chunks`` + ``score_requests`` (the registered scorer of the protocol kind), never a second implementation."""

from __future__ import annotations

import pandas as pd
import pytest

from evalcore.cli.score import factual, factual_formats, mcq, stage
from evalcore.scoring import requests
from evalcore.vocab import LEXICONS


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, list[dict]]]:
    """Every call of the stage's ``score_requests`` from the faces: (protocol kind, merged request rows)."""
    seen: list[tuple[str, list[dict]]] = []

    def spy(merged, params=None, scorers=None):
        seen.append((merged[0]["protocol_kind"] if merged else "", [dict(r) for r in merged]))
        return requests.score_requests(merged, params, scorers)

    monkeypatch.setattr(stage, "score_requests", spy)
    return seen


def _df(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows).assign(_input_error=None)


def test_mcq_rows_are_scored_by_the_stage(calls) -> None:
    df = _df([{"question_id": "q", "order_id": 0, "options": ["a", "b"], "correct_index": 1, "response": "(B)"},
              {"question_id": "q", "order_id": 1, "options": ["b", "a"], "correct_index": 0, "response": "(B)"},
              {"question_id": "q", "order_id": 2, "options": ["b"], "correct_index": 0, "response": "(A)"}])
    out = mcq.score_rows(df, "strict")
    assert [k for k, _ in calls] == ["mcq"] and len(calls[0][1]) == 2  # the bad row never reaches the stage
    assert out["correct"].tolist()[:2] == [True, False] and out["error"].notna().tolist() == [False, False, True]


def test_factual_rows_are_scored_by_the_stage(calls) -> None:
    df = _df([{"response": "A piano and a violin.", "labels": ["Violin"]}, {"response": "Cello.", "labels": ["Viola"]}])
    out = factual.score_rows(df, "instrument", LEXICONS["musicnet_instrument"], {})
    (kind, merged), = calls
    assert kind == "factual" and [r["extracted"] for r in merged] == [["piano", "violin"], ["cello"]]
    assert out["precision"].tolist() == [0.5, 0.0] and out["recall"].tolist() == [1.0, 0.0]


def test_derived_format_chunks_are_merged_by_the_stage(calls) -> None:
    df = _df([{"item_id": "r", "label": "piano", "truth": True, "chunk_index": k, "response": r}
              for k, r in enumerate(["No.", "Yes.", "No."])])
    per_row, per_question = factual_formats.score_derived(df, "true_false", [], "instrument")
    (kind, merged), = calls
    assert kind == "true_false" and len(merged) == 1  # three chunks, one request
    assert merged[0]["chunk_extracted"] == [["no"], ["yes"], ["no"]]
    assert per_question[["correct_any", "correct_majority"]].values.tolist() == [[1.0, 0.0]]
    assert per_row["answer_any"].tolist() == ["yes"] * 3
