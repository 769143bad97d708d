"""The error budget (``max_error_rate``), allowed audio roots and write confinement, on local storage."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore import storage
from evalcore.config import ConfigError, parse_config
from evalcore.pipeline.outcome import ErrorBudgetExceeded, RunResult, check_error_budget, error_reason
from evalcore.pipeline.run import run
from evalcore.pipeline.sources import reject_disallowed_audio


def _cfg(**top) -> dict:
    return {"name": "budget", "datasets": [{"name": "d", "kind": "synthetic"}],
            "models": [{"name": "m", "kind": "text_prior"}], "protocols": [{"name": "factual"}], **top}


# ----------------------------------------------------------------------------- config


def test_config_fields():
    cfg = parse_config(_cfg(max_error_rate=0.05, storage={"allowed_audio_roots": ["s3://b/audio", "/data"]}))
    assert cfg.max_error_rate == 0.05 and cfg.storage.allowed_audio_roots == ["s3://b/audio", "/data"]
    assert parse_config(_cfg()).max_error_rate is None and parse_config(_cfg()).storage.allowed_audio_roots is None
    for bad in (-0.1, 1.5, "lots"):
        with pytest.raises(ConfigError, match="max_error_rate"):
            parse_config(_cfg(max_error_rate=bad))


# ----------------------------------------------------------------------------- the budget check


def _result(n_in: int, n_err: int) -> RunResult:
    return RunResult(root="/runs/x", report="", counts={"requests_in": n_in, "requests_errored": n_err,
                                                        "requests_scored": n_in - n_err})


def _rows(reasons: dict[str, int], ok: int) -> list[dict]:
    rows = [{"error": None, "error_stage": None}] * ok
    for r, n in reasons.items():
        stage, tag = r.split("/")
        rows += [{"error": f"{tag}: details here", "error_stage": stage}] * n
    return rows


def test_within_budget_passes():
    rows = _rows({"decode/missing": 5}, 95)
    check_error_budget(_result(100, 5), rows, 0.05)  # 5 % is not more than 5 %
    check_error_budget(_result(100, 5), rows, None)  # no budget
    check_error_budget(_result(0, 0), [], 0.0)  # nothing ran: nothing to judge


def test_over_budget_names_rate_limit_and_top_reasons():
    rows = _rows({"decode/missing": 3, "decode/corrupt": 2, "model/RuntimeError": 1, "judge/x": 1}, 93)
    with pytest.raises(ErrorBudgetExceeded) as e:
        check_error_budget(_result(100, 7), rows, 0.05)
    msg = str(e.value)
    assert "7 of 100 requests errored (7.0%) > max_error_rate 5.0%" in msg
    assert ("top reasons: decode/missing ×3 ('missing: details here'), decode/corrupt ×2 ('corrupt: details here'), "
            in msg and "/runs/x" in msg)
    assert e.value.rate == 0.07 and e.value.limit == 0.05 and e.value.reasons[0] == ("decode/missing", 3)
    assert e.value.result.counts["requests_in"] == 100


def test_top_reasons_show_the_text_not_only_the_class():
    rows = ([{"error": "ValueError: input has 2 channels, expected 1", "error_stage": "model"}] * 4
            + [{"error": "RuntimeError: " + "the judge said a long thing " * 30, "error_stage": "judge"}]
            + [{"error": None, "error_stage": None}] * 5)
    with pytest.raises(ErrorBudgetExceeded) as e:
        check_error_budget(_result(10, 5), rows, 0.1)
    msg = str(e.value)
    assert ("top reasons: model/ValueError ×4 ('ValueError: input has 2 channels, expected 1'), "
            "judge/RuntimeError ×1") in msg
    assert "chars in all]" in msg and len(msg) < 600  # a long text is cut, not carried whole


def test_error_reason_tags():
    assert error_reason({"error": "missing: audio file not found: x", "error_stage": "decode"}) == "decode/missing"
    assert error_reason({"error": "ValueError: bad", "error_stage": "model"}) == "model/ValueError"
    assert error_reason({"error": "", "error_stage": None}) == "?/?"


# ----------------------------------------------------------------------------- allowed roots, confinement


def test_within_roots(tmp_path):
    assert storage.within("s3://b/audio/x.wav", "s3://b/audio") and storage.within("s3://b/audio/x.wav", "s3://b/audio/")
    assert not storage.within("s3://b/audio2/x.wav", "s3://b/audio")  # whole segments only
    assert not storage.within("s3://b/audio/../other/x.wav", "s3://b/audio")
    assert not storage.within("s3://c/audio/x.wav", "s3://b/audio")
    assert not storage.within(str(tmp_path / "x.wav"), "s3://b")
    assert not storage.within("http://host/b/audio/x.wav", "s3://b/audio")
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir(), outside.mkdir()
    (outside / "x.wav").write_bytes(b"")
    (inside / "link.wav").symlink_to(outside / "x.wav")
    assert storage.within(str(inside / "a" / "b.wav"), str(inside))
    assert storage.within("file://" + str(inside / "a.wav"), str(inside))
    assert not storage.within(str(inside / ".." / "outside" / "x.wav"), str(inside))
    assert not storage.within(str(inside / "link.wav"), str(inside))  # a symlink pointing out
    assert storage.within_any("/anything", None) and not storage.within_any("/anything", [])


def test_reject_disallowed_audio():
    reqs = [{"audio_uri": "s3://b/audio/1.wav", "error": None},
            {"audio_uri": "s3://b/secret/1.wav", "error": None},
            {"audio_uri": None, "error": None},  # text_only: reads no audio
            {"audio_uri": "s3://b/secret/2.wav", "error": "earlier", "error_stage": "expand"}]
    assert reject_disallowed_audio(reqs, ["s3://b/audio"]) == 1
    assert reqs[1]["error"].startswith("not_allowed: ") and reqs[1]["error_stage"] == "decode"
    assert reqs[0]["error"] is None and reqs[2]["error"] is None and reqs[3]["error"] == "earlier"
    assert reject_disallowed_audio([{"audio_uri": "/x", "error": None}], None) == 0


def test_run_storage_refuses_local_paths_outside(tmp_path):
    out = storage.RunStorage(str(tmp_path / "run"))
    out.write_text(str(tmp_path / "run" / "tables" / "a.txt"), "ok")
    for bad in (tmp_path / "run-sibling" / "a.txt", tmp_path / "run" / ".." / "escape.txt", tmp_path / "a.txt"):
        with pytest.raises(storage.OutsideRoot):
            out.write_text(str(bad), "no")
        assert not os.path.exists(os.path.normpath(bad))


# ----------------------------------------------------------------------------- a whole run on Ray


def _wav(path) -> None:
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * 440 * np.arange(16000) / 16000)).astype(np.float32), 16000, format="WAV")
    path.write_bytes(buf.getvalue())


@pytest.mark.ray
def test_run_over_budget_raises_after_writing_tables(tmp_path, local_ray):
    root = tmp_path / "run"
    allowed = root / "demo_audio"  # where the synthetic dataset writes its clips
    (tmp_path / "outside").mkdir()
    _wav(tmp_path / "outside" / "clip.wav")
    items = [{"item_id": "x-outside", "protocol": "factual", "question": "Which instruments?", "labels": ["bass"],
              "audio_uri": str(tmp_path / "outside" / "clip.wav")},
             {"item_id": "x-dotdot", "protocol": "factual", "question": "Which instruments?", "labels": ["bass"],
              "audio_uri": str(allowed / ".." / ".." / "outside" / "clip.wav")}]
    (tmp_path / "extra.jsonl").write_text("\n".join(json.dumps(i) for i in items))
    cfg = parse_config({
        "name": "budget",
        "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 6, "seconds": 2.0, "bad_clips": 4}},
                     {"name": "extra", "kind": "items_file", "params": {"path": str(tmp_path / "extra.jsonl")}}],
        "models": [{"name": "prior", "kind": "text_prior", "resources": {"num_cpus": 0.25, "batch_size": 8}}],
        "protocols": [{"name": "factual", "conditions": ["correct", "random"],
                       "judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}}],
        "storage": {"root": str(root), "allowed_audio_roots": [str(allowed)]},
        "stats": {"bootstrap_resamples": 200},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
        "max_error_rate": 0.05,
    })
    with pytest.raises(ErrorBudgetExceeded) as e:
        run(cfg)
    c = e.value.result.counts
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    assert e.value.rate == c["requests_errored"] / c["requests_in"] > 0.05
    for rel in ("run.json", "report.md", "tables/summary.parquet", "tables/per_item.parquet", "tables/errors.parquet"):
        assert (root / rel).exists(), rel
    assert json.loads((root / "run.json").read_text())["counts"] == c
    errors = pq.read_table(root / "tables" / "errors.parquet").to_pandas()
    correct = errors[errors.condition == "correct"].set_index("item_id")["error"]
    assert correct["x-outside"].startswith("not_allowed") and correct["x-dotdot"].startswith("not_allowed")
    assert {"missing", "corrupt", "truncated", "non_finite"} <= {x.split(":")[0] for x in errors["error"]}
    assert sorted(os.listdir(tmp_path)) == ["extra.jsonl", "outside", "run"]  # nothing written beside the root


def test_items_count_against_the_budget_and_an_empty_protocol_fails_it() -> None:
    from evalcore.pipeline.run import protocols_without_items

    res = RunResult(root="/runs/x", report="", counts={"requests_in": 10, "requests_errored": 0,
                                                      "requests_scored": 10, "items_in": 5, "items_errored": 3,
                                                      "items_valid": 2, "protocols_without_items": []})
    item_errors = [{"error": "unknown field(s) ['answer']", "error_stage": "load"}] * 3
    with pytest.raises(ErrorBudgetExceeded, match=r"3 of 5 items errored \(60.0%\) > max_error_rate 5.0%; "
                                                  r"top reasons: load/unknown field\(s\) \['answer'\] ×3"):
        check_error_budget(res, [], 0.05, item_errors=item_errors)
    check_error_budget(res, [], 0.6, item_errors=item_errors)  # 60 % is within a 60 % budget
    cfg = parse_config(_cfg(protocols=[{"name": "factual"}, {"name": "mcq"}]))
    empty = protocols_without_items(cfg, [{"protocol": "factual", "dataset": "d"}])
    assert empty == ["protocol 'mcq' is configured but has no valid item"]
    # an instance named otherwise is reached by the items of its kind (configs/paper: `instrument`, kind factual)
    named = parse_config(_cfg(protocols=[{"name": "instrument", "kind": "factual"}, {"name": "q", "kind": "mcq"}]))
    assert protocols_without_items(named, [{"protocol": "factual", "dataset": "d"}]) == [
        "protocol 'q' is configured but has no valid item"]
    res.counts["protocols_without_items"] = empty
    with pytest.raises(ErrorBudgetExceeded, match="protocol 'mcq' is configured but has no valid item"):
        check_error_budget(res, [], 0.6, item_errors=item_errors)
    check_error_budget(res, [], None)  # no budget: a warning only (in the report and on the terminal)
