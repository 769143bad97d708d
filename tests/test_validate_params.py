"""``evalcore validate`` checks every component's params, vocabulary and files without building anything:
each mistake exits 2 with one line naming the field, and no dataset, model or judge is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.datasets.base import DATASETS, Dataset
from evalcore.core.errors import ExitCode
from evalcore.models.base import MODELS, MusicLM
from evalcore.core.params import params_schema
from evalcore.core.registry import Registry

runner = CliRunner()


@pytest.fixture
def base(tmp_path: Path) -> dict:
    """A config that validates: an items file that exists (and the audio file its row names), the two baseline
    models, a factual protocol."""
    items = tmp_path / "items.jsonl"
    (tmp_path / "a.wav").write_bytes(b"RIFF")  # validate checks that it exists, not what it holds
    items.write_text(json.dumps({"item_id": "a", "protocol": "factual", "audio_uri": "a.wav", "question": "q?",
                                 "labels": ["piano"]}) + "\n")
    return {"name": "t",
            "datasets": [{"name": "mine", "kind": "items_file", "params": {"path": str(items)}},
                         {"name": "synth", "kind": "synthetic", "params": {"n_clips": 4}}],
            "models": [{"name": "listener", "kind": "dsp_listener", "params": {"sample_rate": 16000}}],
            "protocols": [{"name": "factual", "judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}}]}


@pytest.fixture
def nothing_built(monkeypatch):
    """Fail the test if anything is built: a registry factory called, a model or dataset instantiated."""

    def refuse(*a, **k):
        raise AssertionError("validate built a component")

    monkeypatch.setattr(Registry, "build", refuse)
    # every registered dataset and model class refuses to be constructed (``__init__``, not ``__new__``:
    # CPython does not restore a class's ``__new__`` slot cleanly once a patched one is deleted again)

    for reg in (DATASETS, MODELS):
        for kind in reg.names():
            cls = reg.get(kind)
            if isinstance(cls, type) and issubclass(cls, (Dataset, MusicLM)):
                params_schema(cls)  # cached from the real constructor before it is replaced
                monkeypatch.setattr(cls, "__init__", refuse)


def _validate(tmp_path: Path, cfg: dict, *extra: str):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return runner.invoke(app, ["validate", *extra, str(path)])


def _one_line_naming(res, field: str, says: str) -> None:
    assert res.exit_code == ExitCode.USAGE, res.output
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    assert lines[0] == "invalid run config:" and len(lines) == 2, res.stderr  # the header and one mistake
    assert lines[1].startswith(f"{field}: ") and says in lines[1], lines[1]
    assert "Traceback" not in res.output


def test_the_base_config_validates(tmp_path, base, nothing_built) -> None:
    res = _validate(tmp_path, base)
    assert res.exit_code == ExitCode.OK, res.output


def test_n_clip(tmp_path, base, nothing_built) -> None:
    base["datasets"][1]["params"] = {"n_clip": 4}
    _one_line_naming(_validate(tmp_path, base), "datasets.1.params.n_clip", "did you mean 'n_clips'?")


def test_sample_rat(tmp_path, base, nothing_built) -> None:
    base["models"][0]["params"] = {"sample_rat": 16000}
    _one_line_naming(_validate(tmp_path, base), "models.0.params.sample_rat", "did you mean 'sample_rate'?")


def test_vocabulary_instrumnt(tmp_path, base, nothing_built) -> None:
    base["protocols"][0]["judge"]["params"]["vocabulary"] = "instrumnt"
    _one_line_naming(_validate(tmp_path, base), "protocols.0.judge.params.vocabulary", "did you mean 'instrument'?")


def test_items_file_without_path(tmp_path, base, nothing_built) -> None:
    base["datasets"][0]["params"] = {"audio_root": str(tmp_path)}
    _one_line_naming(_validate(tmp_path, base), "datasets.0.params.path", "required field missing")


def _hf(tmp_path: Path, **params) -> dict:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / "config.json").write_text(json.dumps({"model_type": "qwen2_audio"}))
    (ckpt / "preprocessor_config.json").write_text(json.dumps({"sampling_rate": 16000, "chunk_length": 30}))
    return {"name": "ckpt", "kind": "hf_audio_lm", "params": {"checkpoint": str(ckpt), **params}}


def test_a_valid_hf_checkpoint_passes(tmp_path, base, nothing_built) -> None:
    base["models"].append(_hf(tmp_path, dtype="bfloat16"))
    res = _validate(tmp_path, base)
    assert res.exit_code == ExitCode.OK, res.output


def test_dtype_bfloat17(tmp_path, base, nothing_built) -> None:
    base["models"].append(_hf(tmp_path, dtype="bfloat17"))
    _one_line_naming(_validate(tmp_path, base), "models.1.params.dtype", "got 'bfloat17'")


def test_unknown_hf_audio_lm_param(tmp_path, base, nothing_built) -> None:
    base["models"].append(_hf(tmp_path, max_new_token=16))
    _one_line_naming(_validate(tmp_path, base), "models.1.params.max_new_token", "did you mean 'max_new_tokens'?")


def test_checkpoint_that_does_not_exist(tmp_path, base, nothing_built) -> None:
    base["models"].append({"name": "ckpt", "kind": "hf_audio_lm", "params": {"checkpoint": str(tmp_path / "nope")}})
    _one_line_naming(_validate(tmp_path, base), "models.1.params.checkpoint", "does not exist")
    assert _validate(tmp_path, base, "--no-check-paths").exit_code == ExitCode.OK


def test_checkpoint_of_an_unsupported_family(tmp_path, base, nothing_built) -> None:
    model = _hf(tmp_path)
    (Path(model["params"]["checkpoint"]) / "config.json").write_text(json.dumps({"model_type": "bert"}))
    base["models"].append(model)
    _one_line_naming(_validate(tmp_path, base), "models.1.params.checkpoint", "'bert' is not a supported family")


def test_items_file_that_does_not_exist(tmp_path, base, nothing_built) -> None:
    base["datasets"][0]["params"]["path"] = str(tmp_path / "missing.jsonl")
    _one_line_naming(_validate(tmp_path, base), "datasets.0.params.path", "does not exist")


def test_run_checks_the_same_before_ray(tmp_path, base, monkeypatch) -> None:
    """``evalcore run`` refuses the same mistake with exit 2 before it starts Ray or reads any item."""
    from evalcore.pipeline import run as run_module

    def refuse(*a, **k):
        raise AssertionError("the run started")

    monkeypatch.setattr(run_module, "init_ray", refuse)
    monkeypatch.setattr(run_module, "read_items", refuse)
    base["datasets"][0]["params"]["path"] = str(tmp_path / "missing.jsonl")
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(base))
    res = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "run")])
    assert res.exit_code == ExitCode.USAGE, res.output
    assert "datasets.0.params.path: " in res.stderr and "Traceback" not in res.output
