"""Lexical metrics scored in the pipeline's batches give the values the run's scorer would compute itself."""

from __future__ import annotations

import json
import math

import pyarrow as pa

from evalcore.metrics import stage
from evalcore.metrics.freeform import FreeformScorer
from evalcore.pipeline.stages import JUDGED

REF = "A calm piano piece in a minor key with soft strings."


def _row(rid: str, text: str | None, protocol: str = "freeform", n_chunks: int = 1, error: str | None = None,
         reference: str | None = REF) -> dict:
    return {"request_id": rid, "dataset": "d", "item_id": rid, "protocol": protocol, "model": "m",
            "condition": "correct", "variant": "default", "option_order": 0, "chunk_index": 0, "n_chunks": n_chunks,
            "text": text, "reference": reference, "error": error}


def _batch(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in JUDGED} for r in rows], schema=JUDGED)


PLAN = stage.lexical_plan({"freeform": ("mullama", ["bleu", "bleu4", "meteor", "rouge", "cider"]),
                           "captions": ("standard", ["cider"])})


def test_only_whole_freeform_rows_without_error_are_scored():
    assert PLAN == {"freeform": ("mullama", ["bleu", "bleu4", "meteor", "rouge"])}
    rows = [_row("a", "A calm piano piece with strings."), _row("b", "Loud drums."), _row("c", "x", n_chunks=2),
            _row("d", None, error="timeout"), _row("e", "(A)", protocol="mcq"), _row("f", "A calm piano piece."),
            _row("g", "no reference", reference=None)]
    got = stage.score_batch(_batch(rows), PLAN).column("scores").to_pylist()
    assert [s is not None for s in got] == [True, True, False, False, False, True, False]
    values = json.loads(got[0])
    assert values["profile"] == "mullama" and set(values) == {"profile", "bleu", "bleu4", "meteor", "rouge"}


def test_the_scorer_takes_stored_values_and_computes_the_rest_to_the_same_numbers():
    rows = [_row("a", "A calm piano piece with strings."), _row("b", "Loud drums and a fast beat."),
            _row("c", "A calm piano piece."), _row("d", "")]
    scorer = FreeformScorer()
    plain = scorer.score([dict(r) for r in rows])
    staged = stage.score_batch(_batch(rows), PLAN).to_pylist()
    staged[1]["scores"] = None  # e.g. committed by an older version: computed by the scorer
    got = scorer.score(staged)
    assert got == plain
    tampered = [dict(r) for r in staged]
    tampered[0]["scores"] = stage.encode("mullama", {"bleu": 9.0, "bleu4": 9.0, "meteor": 9.0, "rouge": 9.0})
    assert scorer.score(tampered)[0]["bleu"] == 9.0  # stored values are used as they are, not recomputed
    assert stage.decode(staged[0]["scores"], "standard", ["bleu"]) is None  # another profile: recomputed
    assert not any(math.isnan(v) for r in got for k, v in r.items() if k != "error")
