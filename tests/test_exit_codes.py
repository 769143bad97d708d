"""Every ``evalcore`` command returns the documented exit codes (docs/commands.md, "Exit codes"):
0 ok, 1 failed part way, 2 usage or config mistake, 4 nothing scored / error budget exceeded."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.runconfig.config import demo_config_path
from evalcore.core.errors import ExitCode

runner = CliRunner()


def test_the_codes() -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4]
    assert ExitCode.REGRESSION == 3  # evalcore nightly, fail_on_regression


def _jsonl(path: Path, rows: list) -> str:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def _config(tmp_path: Path, items: list[dict], **top) -> str:
    cfg = {"name": "codes", "datasets": [{"name": "mine", "kind": "items_file",
                                         "params": {"path": _jsonl(tmp_path / "items.jsonl", items)}}],
           "models": [{"name": "prior", "kind": "text_prior"}],
           "protocols": [{"name": "mcq", "judge": {"kind": "mcq_string"}},
                         {"name": "factual", "judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}}],
           "storage": {"root": str(tmp_path / "run")}, "ray": {"progress_bars": False}, **top}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    return str(tmp_path / "cfg.yaml")


# a researcher's multiple-choice rows with a field name evalcore does not know ("answer")
BAD_MCQ = [{"item_id": f"q{i}", "protocol": "mcq", "question": "Which?", "audio_uri": "/nowhere.wav",
            "options": ["piano", "drums"], "answer": 0} for i in range(3)]


def test_run_every_item_invalid_exits_4_with_the_reasons(tmp_path: Path) -> None:
    res = runner.invoke(app, ["run", _config(tmp_path, BAD_MCQ)])
    assert res.exit_code == ExitCode.UNSCORED, res.output
    assert "nothing could be scored (no valid item: 3 of 3 item rows rejected)" in res.stderr
    assert "top reasons: load/unknown field(s) ['answer'] ×3" in res.stderr
    assert "WARNING: protocol 'mcq' is configured but has no valid item" in res.stderr
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Warnings" in report and "protocol 'factual' is configured but has no valid item" in report


@pytest.mark.ray
def test_run_with_rejected_item_rows_exits_4_under_a_budget_and_names_the_lost_protocol(tmp_path: Path,
                                                                                         local_ray) -> None:
    import numpy as np
    import soundfile as sf

    good = []
    for i in range(2):
        sf.write(tmp_path / f"c{i}.wav", np.zeros(16_000, np.float32), 16_000)
        good.append({"item_id": f"f{i}", "protocol": "factual", "question": "Which instruments?",
                     "labels": ["piano"], "audio_uri": str(tmp_path / f"c{i}.wav")})
    res = runner.invoke(app, ["run", _config(tmp_path, good + BAD_MCQ, max_error_rate=0.05,
                                             stats={"bootstrap_resamples": 100})])
    assert res.exit_code == ExitCode.UNSCORED, res.output
    assert "error budget exceeded: 3 of 5 items errored (60.0%) > max_error_rate 5.0%" in res.stderr
    assert "WARNING: protocol 'mcq' is configured but has no valid item" in res.stderr
    report = (tmp_path / "run" / "report.md").read_text()
    assert "protocol 'mcq' is configured but has no valid item" in report and "## factual" in report


def test_run_usage_mistakes_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodels: []\n")
    assert runner.invoke(app, ["run", str(bad)]).exit_code == ExitCode.USAGE
    res = runner.invoke(app, ["run", "--resume", str(tmp_path / "none"), "--retry-errors", "flaky"])
    assert res.exit_code == ExitCode.USAGE and "unknown error class(es) flaky" in res.stderr
    res = runner.invoke(app, ["run", "--resume", str(tmp_path / "none")])
    assert res.exit_code == ExitCode.USAGE and "holds no run" in res.stderr
    assert runner.invoke(app, ["validate", str(bad)]).exit_code == ExitCode.USAGE
    assert runner.invoke(app, ["validate", str(demo_config_path())]).exit_code == ExitCode.OK
    assert runner.invoke(app, ["report", str(tmp_path / "none")]).exit_code == ExitCode.USAGE


def test_run_that_fails_part_way_exits_1_and_says_how_to_resume(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nothing listens on: the run's object store is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = _config(tmp_path, BAD_MCQ, storage={"root": "s3://bucket/run", "s3": {
        "endpoint_override": f"127.0.0.1:{port}", "scheme": "http", "region": "us-east-1"}})
    res = runner.invoke(app, ["run", cfg], env={"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
                                                 "AWS_EC2_METADATA_DISABLED": "true"})
    assert res.exit_code == ExitCode.FAILED, res.output
    assert "the run failed part way" in res.stderr and "evalcore run --resume s3://bucket/run" in res.stderr


MCQ = [{"question_id": "q1", "order_id": 0, "options": ["a x", "b y"], "correct_index": 0, "response": "(A)"}]


@pytest.mark.parametrize("command,rows,extra", [
    ("mcq", MCQ, []),
    ("factual", [{"response": "a piano", "labels": ["piano"]}], ["--task", "instrument"]),
    ("freeform", [{"candidate": "a calm piano piece", "reference": "a calm piano piece"}],
     ["--metrics", "bleu,rouge"]),
])
def test_score_commands_exit_0_2_4(tmp_path: Path, command: str, rows: list, extra: list) -> None:
    def score(data: list, *more: str):
        return runner.invoke(app, ["score", command, _jsonl(tmp_path / "in.jsonl", data), "--out",
                                   str(tmp_path / "out"), "--resamples", "10", *extra, *more])

    assert score(rows).exit_code == ExitCode.OK
    assert score(rows, "--group-by", "nope").exit_code == ExitCode.USAGE  # a usage mistake
    res = runner.invoke(app, ["score", command, str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o"),
                              *extra])
    assert res.exit_code == ExitCode.USAGE and "cannot read" in res.stderr
    unscorable = [{k: (None if k in ("response", "candidate") else v) for k, v in r.items()} for r in rows]
    res = score(unscorable)
    assert res.exit_code == ExitCode.UNSCORED and "nothing could be scored" in res.stderr
    assert (tmp_path / "out" / "per_item.parquet").exists()  # the outputs are written all the same
