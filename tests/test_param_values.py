"""``evalcore validate`` checks params' *values*, not only their names and types: a count below 1, a duration or
rate not above 0, an empty path or an unknown choice exits 2 with one line naming the field, before anything is
built or read. One case per registered dataset kind (a new kind without a case fails here), plus the models and
judges whose params are plain numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.runconfig.config import ConfigError, parse_config
from evalcore.datasets.base import DATASETS
from evalcore.core.errors import ExitCode
from evalcore.models.base import MODELS

runner = CliRunner()

#: dataset kind → (params with one bad value, the field, what the line says)
DATASET_CASES: dict[str, tuple[dict, str, str]] = {
    "synthetic": ({"n_clips": 0}, "n_clips", "must be >= 1, got 0"),
    "items_file": ({"path": ""}, "path", "must not be empty"),
    "hummusqa": ({"path": "q.csv", "audio_pattern": ""}, "audio_pattern", "must not be empty"),
    "musicqa": ({"path": "qa.json", "limit": 0}, "limit", "must be >= 1, got 0"),
    "musicnet": ({"metadata": "m.csv", "audio_root": ["a", ""], "labels_root": ["l", "k"]}, "audio_root.1",
                 "must not be empty"),
    "muchomusic": ({"path": "m.csv", "audio_root": "data", "distractors": []}, "distractors", "must not be empty"),
    "rul_muchomusic": ({"path": "RUL-MuchoMusic.json", "audio_dir": ""}, "audio_dir", "must not be empty"),
    "fma": ({"tracks": "t.csv", "genres": "g.csv", "audio_root": "a", "limit": -3}, "limit", "must be >= 1, got -3"),
    "mmau": ({"path": "mmau-test-mini.json", "tasks": []}, "tasks", "must not be empty"),
    "mmar": ({"path": "MMAR-meta.jsonl", "modalities": []}, "modalities", "must not be empty"),
    "mmau_pro": ({"path": "test.parquet", "categories": ["open"]}, "categories", "not multiple-choice categories"),
    "cmi_bench": ({"root": "CMI-bench", "tasks": []}, "tasks", "must not be empty"),
}

LLM = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "rpm": 60, "tpm": 1000}

#: (models[0] or protocols[0].judge as kind + params, the field, what the line says)
COMPONENT_CASES = [
    ("models", {"kind": "null", "params": {"sample_rate": 0}}, "sample_rate", "must be > 0, got 0"),
    ("models", {"kind": "text_prior", "params": {"max_audio_seconds": -1.5}}, "max_audio_seconds",
     "must be > 0, got -1.5"),
    ("models", {"kind": "dsp_listener", "params": {"checkpoint": ""}}, "checkpoint", "must not be empty"),
    ("models", {"kind": "simulated_gpu", "params": {"sample_rate": -16000}}, "sample_rate", "must be > 0"),
    ("models", {"kind": "isolated", "params": {"adapter": "a.b:C", "sample_rate": 0}}, "sample_rate", "must be > 0"),
    ("models", {"kind": "openai_audio_chat", "params": {**LLM, "threads": 0}}, "threads", "must be >= 1, got 0"),
    ("models", {"kind": "openai_audio_chat", "params": {**LLM, "rpm": 0}}, "rpm", "must be >= 1, got 0"),
    ("models", {"kind": "reference_rewrite", "params": {**LLM, "mode": "paraphrase", "timeout_s": 0}}, "timeout_s",
     "must be > 0, got 0"),
    ("judge", {"kind": "llm_extractor", "params": {**LLM, "tpm": 0}}, "tpm", "must be >= 1, got 0"),
    ("judge", {"kind": "mcq_llm", "params": {**LLM, "max_tokens": 0}}, "max_tokens", "must be > 0, got 0"),
    ("judge", {"kind": "mcq_mmau_pro", "params": {"embedder": "nv-embed"}}, "embedder", "'nv-embed-v2' or 'bag-of-words'"),
]


def _base() -> dict:
    return {"name": "t", "datasets": [{"name": "d", "kind": "synthetic", "params": {"n_clips": 2}}],
            "models": [{"name": "m", "kind": "null"}], "protocols": [{"name": "factual"}]}


def _validate(tmp_path: Path, cfg: dict):
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return runner.invoke(app, ["validate", "--no-check-paths", str(path)])


def _one_line(res, field: str, says: str) -> None:
    assert res.exit_code == ExitCode.USAGE, res.output
    lines = [ln.strip() for ln in res.stderr.splitlines() if ln.strip()]
    assert lines[0] == "invalid run config:" and len(lines) == 2, res.stderr
    assert lines[1] == f"{field}: {says}" or (lines[1].startswith(f"{field}: ") and says in lines[1]), lines[1]


def test_every_dataset_kind_has_a_case() -> None:

    assert set(DATASET_CASES) == set(DATASETS.names())


@pytest.mark.parametrize("kind", sorted(DATASET_CASES))
def test_an_out_of_range_dataset_param_exits_2_naming_it(tmp_path, kind) -> None:
    params, field, says = DATASET_CASES[kind]
    cfg = _base()
    cfg["datasets"] = [{"name": "d", "kind": kind, "params": params}]
    _one_line(_validate(tmp_path, cfg), f"datasets.0.params.{field}", says)


@pytest.mark.parametrize("where,component,field,says", COMPONENT_CASES,
                         ids=[f"{c['kind']}-{f}" for _, c, f, _ in COMPONENT_CASES])
def test_an_out_of_range_model_or_judge_param_exits_2_naming_it(tmp_path, where, component, field, says) -> None:
    cfg = _base()
    if where == "models":
        cfg["models"] = [{"name": "m", **component}]
        prefix = "models.0.params"
    else:
        cfg["protocols"] = [{"name": "mcq", "judge": component}]
        prefix = "protocols.0.judge.params"
    _one_line(_validate(tmp_path, cfg), f"{prefix}.{field}", says)


def test_values_in_range_pass_and_choices_are_checked_too() -> None:
    cfg = _base()
    cfg["datasets"][0]["params"] = {"n_clips": 1, "seconds": 0.5, "sample_rate": 8000, "bad_clips": 0,
                                    "format": "FLAC"}
    parse_config(cfg)
    cfg["datasets"] = [{"name": "d", "kind": "fma", "params": {"tracks": "t", "genres": "g", "audio_root": "a",
                                                                "subset": "tiny"}}]
    with pytest.raises(ConfigError, match=r"datasets\.0\.params\.subset: Input should be 'small', .*got 'tiny'"):
        parse_config(cfg)


def test_other_config_fields_use_the_same_words() -> None:
    cfg = _base()
    cfg["models"][0]["resources"] = {"batch_size": 0}
    with pytest.raises(ConfigError, match=r"models\.0\.resources\.batch_size: must be >= 1, got 0"):
        parse_config(cfg)
