"""Endpoints fail early: an unset API-key variable is a ``validate`` error naming the field and the variable (never
a value); ``validate --ping`` and ``run`` (unless ``--no-ping``) call each endpoint once (list its models) and stop
with exit 2 and one line naming the model when it is unreachable, refuses the key or does not serve the model —
before Ray starts. Against the scripted OpenAI-compatible server (tests/llm_server.py) on 127.0.0.1."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.core.errors import ExitCode
from llm_server import LLMServer
from ports import free_ports

runner = CliRunner()
KEY_ENV = "EVALCORE_TEST_PING_KEY"


def _cfg(tmp_path: Path, base_url: str, model: str = "audio-model", judge: bool = False) -> Path:
    endpoint = {"base_url": base_url, "model": model, "api_key_env": KEY_ENV, "timeout_s": 5.0}
    cfg = {"name": "ping", "storage": {"root": str(tmp_path / "run")},
           "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 2}}],
           "models": [{"name": "listener", "kind": "dsp_listener"}] if judge else
                     [{"name": "chatty", "kind": "openai_audio_chat", "params": endpoint}],
           "protocols": [{"name": "mcq", "judge": {"kind": "mcq_llm", "params": {**endpoint, "rpm": 60, "tpm": 1000}}}]
           if judge else [{"name": "factual"}]}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _one_line(res, field: str, *says: str) -> str:
    assert res.exit_code == ExitCode.USAGE, res.output
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("evalcore: run ")]
    assert len(lines) == 2 and lines[0].endswith(":"), res.stderr  # a header and one problem
    assert field in lines[1] and all(s in lines[1] for s in says), lines[1]
    assert "Traceback" not in res.output
    return lines[1]


@pytest.fixture
def key(monkeypatch) -> str:
    value = "sk-ping-" + uuid.uuid4().hex
    monkeypatch.setenv(KEY_ENV, value)
    return value


@pytest.fixture
def no_ray(monkeypatch):
    """Fail the test if the run got as far as reading items or starting Ray."""
    from evalcore.pipeline import run as run_module

    def refuse(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr(run_module, "init_ray", refuse)
    monkeypatch.setattr(run_module, "read_items", refuse)


def test_an_unset_key_variable_is_a_validate_error_naming_field_and_variable(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    res = runner.invoke(app, ["validate", str(_cfg(tmp_path, "http://127.0.0.1:9/v1"))])
    line = _one_line(res, "models.0.params.api_key_env: ", f"environment variable {KEY_ENV} is not set", "'chatty'")
    assert line.startswith("models.0.params.api_key_env: ")


def test_an_unset_key_variable_of_a_judge_fails_the_run_before_ray(tmp_path, monkeypatch, no_ray) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    res = runner.invoke(app, ["run", str(_cfg(tmp_path, "http://127.0.0.1:9/v1", judge=True))])
    _one_line(res, "protocols.0.judge.params.api_key_env: ", KEY_ENV, "mcq_llm of protocol 'mcq'")


def test_a_refused_connection_exits_2_naming_the_model(tmp_path, key, no_ray) -> None:
    (port,) = free_ports(1)  # nothing listens there
    path = _cfg(tmp_path, f"http://127.0.0.1:{port}/v1")
    assert runner.invoke(app, ["validate", str(path)]).exit_code == ExitCode.OK  # no call without --ping
    line = _one_line(runner.invoke(app, ["validate", "--ping", str(path)]), "models.0.params.base_url: ",
                     "model 'chatty'", f"cannot reach http://127.0.0.1:{port}/v1", "refused")
    assert key not in line
    _one_line(runner.invoke(app, ["run", str(path)]), "models.0.params.base_url: ", "model 'chatty'", "refused")


def test_no_ping_skips_the_call(tmp_path, key, no_ray) -> None:
    (port,) = free_ports(1)
    res = runner.invoke(app, ["run", "--no-ping", str(_cfg(tmp_path, f"http://127.0.0.1:{port}/v1"))])
    assert res.exit_code == ExitCode.FAILED and "the run started" in res.stderr, res.output  # it got past preflight


def test_a_refused_key_is_one_line_naming_the_variable_not_its_value(tmp_path, key, no_ray) -> None:
    with LLMServer(served_models=("audio-model",), api_key="sk-the-right-one") as srv:
        path = _cfg(tmp_path, srv.base_url)
        line = _one_line(runner.invoke(app, ["validate", "--ping", str(path)]), "models.0.params.api_key_env: ",
                         "model 'chatty'", f"${KEY_ENV}", "HTTP 401")
        res = runner.invoke(app, ["run", str(path)])
        calls = [r.path for r in srv.requests]
    assert key not in line and key not in res.output
    _one_line(res, "models.0.params.api_key_env: ", "HTTP 401")
    assert calls == ["GET /v1/models", "GET /v1/models"]  # one cheap call each, no chat request


def test_an_unknown_model_is_one_line_naming_what_is_served(tmp_path, key) -> None:
    with LLMServer(served_models=("other-model",), api_key=key) as srv:
        res = runner.invoke(app, ["validate", "--ping", str(_cfg(tmp_path, srv.base_url, judge=True))])
    _one_line(res, "protocols.0.judge.params.model: ", "mcq_llm of protocol 'mcq'", "does not serve 'audio-model'",
              "'other-model'")


def test_a_served_model_and_a_server_without_a_listing_pass(tmp_path, key) -> None:
    with LLMServer(served_models=("audio-model",), api_key=key) as srv:
        res = runner.invoke(app, ["validate", "--ping", str(_cfg(tmp_path, srv.base_url))])
        assert res.exit_code == ExitCode.OK, res.output
    with LLMServer() as srv:  # GET /models answers 404: reachable, the model is not checked
        res = runner.invoke(app, ["validate", "--ping", str(_cfg(tmp_path, srv.base_url))])
        assert res.exit_code == ExitCode.OK, res.output
