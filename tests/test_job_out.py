"""A Ray job run with a working directory runs in Ray's temporary copy of it: a run root there (a relative --out,
or none) is refused before anything runs, with one line naming --out and exit 2."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from evalcore.core import cluster
from evalcore.cli import app
from evalcore.core.errors import ExitCode


@pytest.fixture
def in_job_copy(tmp_path, monkeypatch):
    """The working directory and environment of a job driver started by `ray job submit --working-dir`."""
    copy = tmp_path / "session_x" / "runtime_resources" / "working_dir_files" / "_ray_pkg_0123abcd"
    copy.mkdir(parents=True)
    monkeypatch.chdir(copy)
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(
        {"runtime_env": {"working_dir": "gcs://_ray_pkg_0123abcd.zip"}, "metadata": {}}))
    return copy


@pytest.mark.parametrize("out", [None, "runs/x", "."])
def test_a_run_root_in_the_copy_is_refused_naming_out(in_job_copy, out):
    res = CliRunner().invoke(app, ["run", *(["--out", out] if out else [])])
    assert res.exit_code == ExitCode.USAGE, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("--out: ") and str(in_job_copy) in lines[0]
    assert not (in_job_copy / "runs").exists()


def test_absolute_and_s3_roots_are_fine_in_a_job(in_job_copy, tmp_path):
    assert cluster.temporary_root(str(tmp_path / "runs" / "x")) is None
    assert cluster.temporary_root("s3://bucket/runs/x") is None
    assert cluster.temporary_root(str(in_job_copy / "runs" / "x")) is not None  # absolute, but inside the copy


def test_the_unpacked_copy_is_recognised_without_the_job_config(in_job_copy, monkeypatch):
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR")
    assert cluster.job_working_dir() == str(in_job_copy)


def test_outside_a_job_a_relative_root_is_fine(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    assert cluster.job_working_dir() is None and cluster.temporary_root("runs/x") is None
    assert os.getcwd() == str(tmp_path)
