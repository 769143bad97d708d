"""What `evalcore run` prints: a healthy run off a terminal has no ERROR-level line, no Ray status blocks and no
report body; its stages are named (decode, model:<name>, judge); the end gives the report's absolute path."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from evalcore.reports import console

pytestmark = pytest.mark.ray

# Python logging ("ERROR", "Error:") and Ray's C++ logging ("[2026-11-23 18:51:00,146 E 5982 5982] core_worker.cc")
ERROR_LINE = re.compile(r"\bERROR\b|^\[[^\]]* E \d+ \d+\]", re.M)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """configs/small.yaml cut to 4 clips, run by the CLI with stdout and stderr piped (not a terminal)."""
    tmp = tmp_path_factory.mktemp("console")
    data = yaml.safe_load((REPO / "configs" / "small.yaml").read_text())
    data["datasets"][0]["params"].update(n_clips=4, bad_clips=1)
    cfg = tmp / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(data))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # a local cluster of its own
    env.pop("RAY_DATA_DISABLE_PROGRESS_BARS", None)  # as a user's shell has it (conftest sets it for in-process runs)
    proc = subprocess.run([sys.executable, "-m", "evalcore.cli", "run", str(cfg), "--out", "out"], cwd=tmp,
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc, tmp


def test_a_healthy_run_prints_no_error_line_and_no_report_body(tiny_run):
    proc, tmp = tiny_run
    both = proc.stdout + proc.stderr
    assert not ERROR_LINE.search(both), ERROR_LINE.search(both).group(0)
    assert "# evalcore report" not in both
    assert not [ln for ln in both.splitlines() if ln.startswith(("## ", "| "))]  # no section, no table row
    assert "Token authentication is enabled" not in both
    # off a terminal: no Ray Data status blocks or bars
    assert "Running Dataset" not in both and "Total Progress" not in both and "MapBatches(" not in both
    root = (tmp / "out").resolve()  # --out was relative: the path printed is absolute
    out = proc.stdout.splitlines()
    assert out[:3] == [f"report: {root}/report.md", f"report: {root}/report.html", f"tables: {root}/tables/"]
    assert (root / "report.html").is_file()
    # then one verdict line per model, nothing else (4 clips: fewer than stats.min_items, so unclear)
    assert [ln.split(":")[0] for ln in out[3:]] == ["listener", "text-prior"], out
    assert all(": listens unclear — " in ln for ln in out[3:]), out
    assert (root / "report.md").read_text().startswith("# evalcore report")


def test_stages_are_named_one_line_each(tiny_run):
    proc, _ = tiny_run
    stages = [ln[len("stage "):].split(": ")[0] for ln in proc.stderr.splitlines() if ln.startswith("stage ")]
    assert stages == ["decode", "model:listener", "model:text-prior", "judge"]
    decode = next(ln for ln in proc.stderr.splitlines() if ln.startswith("stage decode:"))
    n_requests = int(re.search(r"(\d+) requests", decode).group(1))
    counts = re.search(r"requests: (\d+) in = (\d+) scored \+ (\d+) errored", proc.stderr)
    assert counts and int(counts.group(1)) == n_requests and int(counts.group(3)) > 0  # the bad clip errors


def test_ray_data_shows_the_stage_names(local_ray, tmp_path):
    from evalcore.runconfig.config import load_config
    from evalcore.pipeline.graph import judge, model_branch
    from evalcore.core.schema import REQUEST

    cfg = load_config(REPO / "configs" / "small.yaml")
    row = {f.name: None for f in REQUEST} | {"request_id": "r", "model": "listener",
                                             "audio_uri": str(tmp_path / "a.wav")}
    ds = model_branch(cfg.models[0], [row]).map_batches(judge, fn_kwargs={"judges": {}}, batch_format="pyarrow")
    plan = [ln.strip(" +-") for ln in repr(ds).splitlines() if "MapBatches" in ln]
    assert plan == ["MapBatches(judge)", "MapBatches(model:listener)", "MapBatches(decode)"]


def test_verbose_prints_the_report_before_its_path_and_the_verdicts_after(tmp_path, capsys):
    console.finished(str(tmp_path), "# evalcore report — x\nbody", verbose=True, verdicts=["m: listens yes — …"])
    assert capsys.readouterr().out.splitlines() == ["# evalcore report — x", "body", f"report: {tmp_path}/report.md",
                                                    f"report: {tmp_path}/report.html", f"tables: {tmp_path}/tables/",
                                                    "m: listens yes — …"]


def test_ray_data_memory_advice_is_kept_off_the_console_but_other_warnings_are_not():
    def shown(msg: str) -> bool:
        return console._RayDataConsole().filter(logging.LogRecord("ray.data", logging.WARNING, "x", 1, msg, None, None))

    # Ray Data 2.60's high-memory issue text, as its issue detector logs it, and its count line
    assert not shown("\n\nOperator 'MapBatches(commit_batch)' uses 183.2MiB of memory per\nworker on average (up to "
                     "183.2MiB), but Ray only requests 0.0B per worker at\nthe start of the pipeline.\n")
    assert not shown("Found 3 issues. To disable issue detection, run DataContext.get_current()"
                     ".issue_detectors_config.detectors = [].")
    assert shown("Operator 'MapBatches(decode)' is hanging: task 12 has run 600 s, 10 × its peers' mean")
    assert shown("Some other Ray Data warning")
