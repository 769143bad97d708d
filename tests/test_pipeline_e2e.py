"""End to end on a local Ray: the embedded demo and the error rows of bad inputs."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from evalcore.runconfig.config import demo_config_path
from evalcore.pipeline.finish import rerender

pytestmark = pytest.mark.ray

# demo_run (conftest): the embedded demo as shipped, run once per session and shared with test_demo_golden.py,
# whose comparison with the recorded run of the same config is also the check that a run is reproducible


def test_outputs_follow_the_contract(demo_run):
    cfg, res = demo_run
    root = cfg.root
    summary = pq.read_table(f"{root}/tables/summary.parquet").to_pandas()
    for col in ("protocol", "dataset", "model", "condition", "variant", "metric", "value", "ci_low", "ci_high", "n"):
        assert col in summary.columns
    per_item = pq.read_table(f"{root}/tables/per_item.parquet").to_pandas()
    assert len(per_item) == res.counts["requests_scored"]
    responses = pq.read_table(f"{root}/responses").to_pandas()
    judgments = pq.read_table(f"{root}/judgments").to_pandas()
    assert len(responses) == len(judgments) and responses["request_id"].nunique() == res.counts["requests_in"]
    items = pq.read_table(f"{root}/items").to_pandas()
    assert len(items) == res.counts["items_valid"]
    report = open(f"{root}/report.md").read()
    assert "## Counts" in report and "## Does the model listen? Every paired difference" in report
    # the report opens with the verdict per model: the listener listens, the text prior answers the same anyway
    assert [ln for ln in report.splitlines() if ln.startswith("## ")][0] == "## Does it listen?"
    top = report.split("## Counts", 1)[0]
    assert "* **listener** — listens: **yes**" in top and "* **text-prior** — listens: **no**" in top
    assert [v.split(" — ", 1)[0] for v in res.verdicts] == ["listener: listens yes", "text-prior: listens no"]
    page = open(f"{root}/report.html").read()
    assert page.count('<img src="data:image/png;base64,') == 3 and "<h2>Does it listen?</h2>" in page
    assert rerender(root) == report  # `evalcore report` renders the same report from the tables


def test_counts_reconcile_and_bad_clips_are_error_rows(demo_run):
    cfg, res = demo_run
    c = res.counts
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    errors = pq.read_table(f"{cfg.root}/tables/errors.parquet").to_pandas()
    assert len(errors) == c["requests_errored"] + c["items_errored"]
    decode_errors = errors[errors["error_stage"] == "decode"]["error"]
    for reason in ("missing", "corrupt", "truncated", "non_finite"):
        assert decode_errors.str.startswith(reason).any(), reason
    assert "reconciled" in res.report


def _row(summary, model, protocol, metric, condition):
    s = summary[(summary.model == model) & (summary.protocol == protocol) & (summary.metric == metric)
                & (summary.condition == condition) & (summary.group == "all")]
    assert len(s) == 1, (model, protocol, metric, condition)
    return s.iloc[0]


def test_listener_listens_and_text_prior_does_not(demo_run):
    cfg, _ = demo_run
    summary = pq.read_table(f"{cfg.root}/tables/summary.parquet").to_pandas()
    for metric in ("f1_micro", "f1_macro"):
        d = _row(summary, "listener", "factual", metric, "correct-random")
        assert d.value >= 0.3 and d.ci_low > 0, d
        t = _row(summary, "text-prior", "factual", metric, "correct-random")
        assert t.ci_low <= 0 <= t.ci_high, t
    acc = _row(summary, "listener", "mcq", "accuracy", "correct-random")
    assert acc.ci_low > 0
    for cond in ("silence", "noise", "text_only"):
        assert _row(summary, "listener", "factual", "f1_micro", f"correct-{cond}").ci_low > 0


def test_run_json_has_counts(demo_run):
    cfg, res = demo_run
    meta = json.loads(open(f"{cfg.root}/run.json").read())
    assert meta["counts"] == res.counts
    assert set(meta["models"]) == {"listener", "text-prior"}


def test_run_json_has_the_profile_and_its_rows_reconcile_with_the_counts(demo_run):
    cfg, res = demo_run
    c, profile = res.counts, json.loads(open(f"{cfg.root}/run.json").read())["profile"]
    stages = {s["stage"]: s for s in profile["stages"]}
    judged = next(name for name in stages if name.startswith("judge"))  # judge, or judge+metrics fused by Ray Data
    assert list(stages) == ["items", "requests", "read", "align", "decode", "model:listener", "model:text-prior",
                            judged, "commit", "score", "report"]
    for s in profile["stages"]:
        assert s["where"] == ("driver" if s["stage"] in ("items", "requests", "score", "report") else "ray"), s
        assert 0 <= s["start_s"] <= s["first_output_s"] <= s["end_s"] <= profile["wall_s"], s
        assert 0 < s["wall_s"] <= s["end_s"] - s["start_s"] + 5e-3 and s["busy_s"] > 0, s  # (each rounded to 1 ms)
    sent = res.attempt["requests_sent"]
    assert (stages["items"]["rows_in"], stages["items"]["rows_out"]) == (c["items_in"], c["items_valid"])
    assert stages["requests"]["rows_out"] == c["requests_in"] == sent  # a fresh run sends every request
    assert stages["read"]["rows_out"] == stages["align"]["rows_in"] == stages["align"]["rows_out"] == sent
    assert stages["decode"]["rows_in"] == sent and stages["decode"]["rows_out"] >= sent  # a row per chunk
    answers = [stages[f"model:{m}"] for m in ("listener", "text-prior")]
    assert sum(s["rows_in"] for s in answers) == sum(s["rows_out"] for s in answers) == stages["decode"]["rows_out"]
    assert stages[judged]["rows_in"] == stages[judged]["rows_out"] == stages["commit"]["rows_in"] \
        == stages["commit"]["rows_out"] == stages["decode"]["rows_out"]
    assert (stages["score"]["rows_in"], stages["score"]["rows_out"]) == (c["requests_in"], c["requests_scored"])
    for name, m in profile["models"].items():  # per model: wall, how busy, answers/s
        stage = stages[f"model:{name}"]
        assert (m["wall_s"], m["answers"]) == (stage["wall_s"], stage["rows_out"]) and 0 < m["busy_fraction"] <= 1
        assert m["answers_per_s"] == pytest.approx(m["answers"] / m["wall_s"], rel=1e-2)
    first = profile["first_commit"]  # the first shard, after the model stage started and before the stream ended
    model_start = min(s["start_s"] for s in answers)
    assert first["model_start_s"] == model_start and 0 < first["after_model_start_s"] == pytest.approx(
        first["at_s"] - model_start, abs=1e-3) and first["at_s"] <= stages["commit"]["end_s"]
    # the report's run section shows the same stages (but its own), and the console's closing lines come from it
    run_section = res.report.split("\n## Run\n", 1)[1]
    assert [ln.split(" | ")[0][2:] for ln in run_section.splitlines() if ln.startswith("| ")][1:len(stages)] \
        == list(stages)[:-1]


def test_cli_report_and_help(demo_run, tmp_path):
    from typer.testing import CliRunner

    from evalcore.cli import app

    cfg, _ = demo_run
    runner = CliRunner()
    res = runner.invoke(app, ["report", cfg.root])
    assert res.exit_code == 0 and res.output.startswith("# evalcore report — demo")
    res = runner.invoke(app, ["report", str(tmp_path / "nothing")])
    assert res.exit_code == 2 and "not a finished run" in res.output
    res = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200", "TERM": "dumb"})
    assert res.exit_code == 0 and "--out" in res.output and "embedded offline demo" in res.output
    res = runner.invoke(app, ["validate", str(demo_config_path())])
    assert res.exit_code == 0 and res.output.startswith("ok: demo")


def test_report_has_the_mcq_audio_attention_table(demo_run):
    cfg, res = demo_run
    mcq = next(p for p in cfg.protocols if p.name == "mcq")
    others = [c for c in mcq.conditions if c != "correct"]
    report = res.report
    head = "## Audio-attention test · mcq · synth"
    assert head in report
    section = report.split(head, 1)[1].split("\n## ", 1)[0]
    tables = [[ln for ln in block.splitlines() if ln.startswith("| ")] for block in section.split("\n\n")]
    found = [t for t in tables if t]
    acc, paired = found[0], found[-1]
    # the demo's bad clips error in every audio condition: cells say so, and accuracy counting them as wrong follows
    assert len(found) == 3 and "errored)" in acc[1] and found[1][0] == acc[0]
    assert acc[0] == "| model | variant | " + " | ".join(["correct", "noise", "silence", "random", "text_only"]) + " |"
    assert len(acc) - 1 == len(cfg.models)  # one row per model (one variant)
    assert len(paired) - 1 == len(cfg.models) * len(others)  # one paired test per model and fake-audio condition
    listener = [ln for ln in paired if ln.startswith("| listener |")]
    assert any("correct-random" in ln and ln.endswith("yes (CI > 0) |") for ln in listener)
    assert "### mcq · synth by task (correct audio)" in report
