"""The error budget (``max_error_rate``), allowed audio roots and write confinement, on local storage."""

from __future__ import annotations

import io
import json
import os

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from evalcore.core import storage
from evalcore.runconfig.config import DEFAULT_MAX_ERROR_RATE, ConfigError, parse_config
from evalcore.pipeline.outcome import (BUDGET_NO_ITEMS, BUDGET_SCOPES, ErrorBudgetExceeded, RunResult,
                                       check_error_budget, error_reason)
from evalcore.pipeline.run import run
from evalcore.pipeline.sources import reject_disallowed_audio


def _cfg(**top) -> dict:
    return {"name": "budget", "datasets": [{"name": "d", "kind": "synthetic"}],
            "models": [{"name": "m", "kind": "text_prior"}], "protocols": [{"name": "factual"}], **top}


# ----------------------------------------------------------------------------- config


def test_config_fields():
    cfg = parse_config(_cfg(max_error_rate=0.05, storage={"allowed_audio_roots": ["s3://b/audio", "/data"]}))
    assert cfg.max_error_rate == 0.05 and cfg.storage.allowed_audio_roots == ["s3://b/audio", "/data"]
    assert parse_config(_cfg()).max_error_rate == DEFAULT_MAX_ERROR_RATE == 0.5  # the default budget
    assert parse_config(_cfg(max_error_rate=None)).max_error_rate is None  # null: no budget
    assert parse_config(_cfg()).storage.allowed_audio_roots is None
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


def test_the_budget_s_rule_is_said_and_applied_from_one_place() -> None:
    """``evalcore validate`` says each part of the rule (BUDGET_SCOPES, BUDGET_NO_ITEMS), and the check applies the
    scopes in that order: with every scope above the budget, the first names the error; within it, the next."""
    from evalcore.cli import budget_text

    said = budget_text(0.05, True)
    assert all(words in said for words in BUDGET_SCOPES.values()) and BUDGET_NO_ITEMS in said and "5.0%" in said
    model = {"requests_in": 10, "requests_errored": 5, "error_share": 0.5}
    counts = {"items_in": 10, "items_errored": 5, "requests_in": 10, "requests_errored": 5, "models": {"m": model}}
    bench = {"protocol": "p", "dataset": "d", "requests_in": 10, "requests_errored": 5}
    named = []
    for _ in BUDGET_SCOPES:
        with pytest.raises(ErrorBudgetExceeded) as e:
            check_error_budget(RunResult("/r", counts, ""), [], 0.1, benchmarks=[bench])
        scope = ("model" if e.value.model else "benchmark" if e.value.benchmark
                 else "items" if " items errored " in str(e.value) else "requests")
        named.append(scope)
        if scope == "items":
            counts["items_errored"] = 0
        elif scope == "model":
            model.update(requests_errored=0, error_share=0.0)
        elif scope == "benchmark":
            bench["requests_errored"] = 0
    assert named == list(BUDGET_SCOPES)
    counts["requests_errored"] = 0
    check_error_budget(RunResult("/r", counts, ""), [], 0.1, benchmarks=[bench])


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


# ----------------------------------------------------------------------------- per model


def _two_models(dead_errored: int, healthy_errored: int = 0, n: int = 40) -> tuple[RunResult, list[dict]]:
    rows = ([{"model": "dead", "error": "connection error: [Errno 111] Connection refused", "error_stage": "model"}]
            * dead_errored + [{"model": "dead", "error": None, "error_stage": None}] * (n - dead_errored)
            + [{"model": "healthy", "error": "missing: audio file not found", "error_stage": "decode"}] * healthy_errored
            + [{"model": "healthy", "error": None, "error_stage": None}] * (n - healthy_errored))
    from evalcore.scoring.requests import counts

    c = counts(10, 0, rows)
    return RunResult(root="/runs/x", report="", counts=c), [r for r in rows if r["error"] is not None]


def test_every_models_share_is_counted() -> None:
    res, _ = _two_models(40, 2)
    assert res.counts["models"] == {"dead": {"requests_in": 40, "requests_errored": 40, "error_share": 1.0},
                                    "healthy": {"requests_in": 40, "requests_errored": 2, "error_share": 0.05}}
    assert res.counts["requests_errored"] == 42 == sum(m["requests_errored"] for m in res.counts["models"].values())


def test_a_dead_model_beside_a_healthy_one_exceeds_the_default_budget_by_name() -> None:
    """Finding 3: one model with every request errored, the other scored: the run's share is 50 %, within a 50 %
    budget, and the run used to pass; per model it is 100 % and fails, naming the model and its top reason."""
    res, errors = _two_models(40)
    assert res.counts["requests_errored"] / res.counts["requests_in"] == 0.5  # within the run-wide budget
    with pytest.raises(ErrorBudgetExceeded) as e:
        check_error_budget(res, errors, DEFAULT_MAX_ERROR_RATE)
    assert e.value.model == "dead" and e.value.rate == 1.0
    assert str(e.value).startswith("error budget exceeded: model 'dead' errored on 40 of 40 of its requests "
                                   "(every one of its requests) (100.0%) > max_error_rate 50.0%; top reasons: "
                                   "model/connection error ×40")


def test_a_model_over_the_budget_fails_and_one_within_passes() -> None:
    res, errors = _two_models(21)  # 52.5 % of one model's requests
    with pytest.raises(ErrorBudgetExceeded, match="model 'dead' errored on 21 of 40 of its requests \\(52.5%\\)"):
        check_error_budget(res, errors, 0.5)
    check_error_budget(*_two_models(20), 0.5)  # 50 % is not more than 50 %
    check_error_budget(res, errors, None)  # null: no budget


def test_validate_says_the_budget_the_docs_give(tmp_path) -> None:
    """The default is one number in code, in `evalcore validate`'s output and in docs/config.md."""
    import pathlib

    import yaml
    from typer.testing import CliRunner

    from evalcore.cli import app

    for top, said in (({}, "error budget: max_error_rate 0.5 (the default;"),
                      ({"max_error_rate": 0.1}, "error budget: max_error_rate 0.1 (set;"),
                      ({"max_error_rate": None}, "no error budget (max_error_rate: null)")):
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(_cfg(**top)))
        res = CliRunner().invoke(app, ["validate", "--no-check-paths", str(tmp_path / "c.yaml")])
        assert res.exit_code == 0 and said in res.output, res.output
    doc = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "config.md").read_text()
    assert f"`max_error_rate` is **{DEFAULT_MAX_ERROR_RATE:g} when the config leaves it out**" in doc
    assert f"# default {DEFAULT_MAX_ERROR_RATE:g}; exit 4" in doc


@pytest.mark.ray
@pytest.mark.slow
def test_a_dead_model_beside_a_healthy_one_exits_4_naming_it(tmp_path, local_ray, monkeypatch) -> None:
    """Findings 2 and 3 in one run: a model whose endpoint is dead (every request errors) beside one that scores,
    under the default budget, with protocol instances named apart from their kinds. The run exits 4 naming the
    dead model and its top reason; every model's errored share is on the console, in run.json and the report; no
    instance is reported without items."""
    import yaml
    from typer.testing import CliRunner

    from evalcore.cli import app
    from ports import free_ports

    monkeypatch.setenv("EVALCORE_TEST_DEAD_KEY", "sk-dead-test-key")
    port = free_ports(1)[0]  # nothing listens there
    cfg = {"name": "dead", "datasets": [{"name": "synth", "kind": "synthetic",
                                         "params": {"n_clips": 3, "seconds": 1.0, "bad_clips": 0}}],
           "models": [{"name": "healthy", "kind": "text_prior", "resources": {"num_cpus": 0.25, "batch_size": 16}},
                      {"name": "dead", "kind": "openai_audio_chat",
                       "params": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "max_retries": 0,
                                  "timeout_s": 5, "threads": 2, "api_key_env": "EVALCORE_TEST_DEAD_KEY"},
                       "resources": {"num_cpus": 0.25, "batch_size": 16}}],
           "protocols": [{"name": "choice", "kind": "mcq", "conditions": ["correct", "silence"]},
                         {"name": "labels", "kind": "factual", "conditions": ["correct"]}],
           "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 100},
           "ray": {"progress_bars": False, "decode_num_cpus": 0.5}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    res = CliRunner().invoke(app, ["run", "--quiet", "--no-ping", str(tmp_path / "cfg.yaml")])
    assert res.exit_code == 4, res.output
    c = json.loads((tmp_path / "run" / "run.json").read_text())["counts"]
    dead, healthy = c["models"]["dead"], c["models"]["healthy"]
    assert dead["requests_errored"] == dead["requests_in"] > 0 and dead["error_share"] == 1.0
    assert healthy["requests_errored"] == 0 and healthy["requests_in"] == dead["requests_in"]
    assert c["requests_errored"] / c["requests_in"] == 0.5  # within the run-wide budget: only the model's fails
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith(f"evalcore: error budget exceeded: model 'dead' errored on {dead['requests_in']} of "
                           f"{dead['requests_in']} of its requests (every one of its requests) (100.0%) > "
                           "max_error_rate 50.0%; top reasons: model/"), last
    assert f"errored by model: dead {dead['requests_in']} of {dead['requests_in']} (100.0%), healthy 0 of" in res.stderr
    assert c["protocols_without_items"] == [] and "has no valid item" not in res.stderr  # name ≠ kind
    report = (tmp_path / "run" / "report.md").read_text()
    assert "Errored requests by model: dead" in report and "## Warnings" not in report
    assert "## choice · synth (mcq)" in report and "## labels · synth (factual)" in report
    assert "sk-dead-test-key" not in res.output + report  # the key is never written
