"""Factual P/R/F1, pooled (micro) and per item (macro), and how an answer naming no label counts under each
(docs/reproduce.md, "Definitions"), on a hand example through ``evalcore score factual`` and the run's scorer.

Three items: A (true piano; the answer names piano and violin), B (true flute; the answer names nothing),
C (true cello and oboe; the answer names cello).

* micro: TP 2, FP 1, FN 2 → P 2/3, R 1/2, F1 4/7. B's empty answer adds its true label as an FN and nothing to
  precision's denominator: without B, P is still 2/3 and R is 2/3.
* macro: per-item P (0.5, 0, 1), R (1, 0, 0.5), F1 (2/3, 0, 2/3) → 1/2, 1/2, 4/9. B's empty answer scores
  precision 0 — it is counted, not skipped (skipping it would give macro precision 3/4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.scorers.factual import FactualScorer
from evalcore.stats.aggregate import aggregate

ROWS = [("A", ["piano"], "A piano, and a violin."), ("B", ["flute"], "I cannot tell."),
        ("C", ["cello", "oboe"], "A cello.")]
EXTRACTED = {"A": ["piano", "violin"], "B": [], "C": ["cello"]}
EXPECTED = {"precision_micro": 2 / 3, "recall_micro": 1 / 2, "f1_micro": 4 / 7,
            "precision_macro": 1 / 2, "recall_macro": 1 / 2, "f1_macro": 4 / 9}


def test_score_factual_micro_and_macro(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"item_id": i, "labels": t, "response": r}) + "\n" for i, t, r in ROWS))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["score", "factual", str(src), "--out", str(out), "--task", "instrument",
                                   "--resamples", "100"])
    assert res.exit_code == 0, res.output
    per_item = pd.read_parquet(out / "per_item.parquet")
    assert [list(x) for x in per_item["extracted"]] == [EXTRACTED[i] for i, _, _ in ROWS]
    summary = pd.read_parquet(out / "summary.parquet")
    values = dict(zip(summary["metric"], summary["value"]))
    for metric, expected in EXPECTED.items():
        assert values[metric] == pytest.approx(expected), metric


def test_run_scorer_micro_and_macro() -> None:
    """The run's scorer (the same aggregates); and the empty answer: micro precision unchanged without it."""
    scorer = FactualScorer()

    def values(rows: list) -> dict[str, float]:
        scored = scorer.score([{"extracted": EXTRACTED[i], "labels": t} for i, t, _ in rows])
        df = pd.DataFrame([{"item_id": i, "cell": "c", **m} for (i, _, _), m in zip(rows, scored)])
        out = aggregate(df, scorer.aggregates, ["cell"], unit="item_id", resamples=50, confidence=0.95, seed=0)
        return {r["metric"]: r["value"] for r in out if r.get("kind", "value") == "value"}

    whole = values(ROWS)
    for metric, expected in EXPECTED.items():
        assert whole[metric] == pytest.approx(expected), metric
    without_b = values([r for r in ROWS if r[0] != "B"])
    assert without_b["precision_micro"] == pytest.approx(whole["precision_micro"])
    assert without_b["recall_micro"] == pytest.approx(2 / 3)
    assert without_b["precision_macro"] == pytest.approx(3 / 4)  # B counted as 0 above, not skipped
