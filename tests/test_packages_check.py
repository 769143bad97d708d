"""Packages are checked before any model runs: with torch absent, an ``hf_audio_lm`` config (and a BERTScore
metric) fails ``evalcore validate`` and ``evalcore run`` with exit 2, one line per component naming it and the
install command, before Ray starts or an item is read; ``vllm_audio_lm`` asks the interpreter it will run in.

torch is made absent in a child process by a meta-path finder that refuses it, as an uninstalled package is
refused (``import torch`` raises ModuleNotFoundError; ``importlib.util.find_spec`` too), placed before the finders
that would find it. The same config validates in a process where torch is present."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalcore.core import packages
from evalcore.core.errors import ExitCode

pytestmark = pytest.mark.e2e  # each test starts a Python of its own

REPO = Path(__file__).resolve().parents[1]

#: run the evalcore CLI with ``torch`` and ``bert_score`` absent; Ray's start and the item reader exit 99
WITHOUT_TORCH = """
import sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "bert_score"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Absent())
import evalcore.pipeline.run as run_module
def started(*a, **k):
    print("the run started", file=sys.stderr)
    sys.exit(99)
run_module.init_ray = run_module.read_items = started
from evalcore.cli import app
app(sys.argv[1:], prog_name="evalcore")
"""


def _checkpoint(tmp_path: Path) -> str:
    """A checkpoint directory whose small files pass validate (no weights: nothing is loaded)."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir(exist_ok=True)
    (ckpt / "config.json").write_text(json.dumps({"model_type": "qwen2_audio"}))
    (ckpt / "preprocessor_config.json").write_text(json.dumps({"sampling_rate": 16000, "chunk_length": 30}))
    return str(ckpt)


def _config(tmp_path: Path, kind: str = "hf_audio_lm", bertscore: bool = False) -> Path:
    protocol: dict = {"name": "factual"}
    if bertscore:
        bert = tmp_path / "minilm"
        bert.mkdir(exist_ok=True)
        (bert / "config.json").write_text("{}")
        protocol = {"name": "freeform", "metrics": {"names": ["bleu", "bertscore"],
                                                    "bertscore": {"model": str(bert), "num_layers": 6}}}
    cfg = {"name": "pkgs", "storage": {"root": str(tmp_path / "run")},
           "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 2}}],
           "models": [{"name": "qwen", "kind": kind, "params": {"checkpoint": _checkpoint(tmp_path)}}],
           "protocols": [protocol]}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cli(*args: str, script: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    code = script or "import sys\nfrom evalcore.cli import app\napp(sys.argv[1:], prog_name='evalcore')"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})


def _problems(res: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    return [ln.strip() for ln in res.stderr.splitlines() if ln.startswith("  ")]


#: the install hints run from any directory: this interpreter's pip and the checkout's absolute path; on a machine
#: without a GPU, with the cpu extra (the CPU build of torch)
CPU = "" if packages.has_gpu() else ",cpu"
INSTALL_MODELS = f"install: {sys.executable} -m pip install -e '{REPO}[models{CPU}]'"
INSTALL_METRICS = f"install: {sys.executable} -m pip install -e '{REPO}[metrics{CPU}]'"


def test_the_hints_name_this_interpreter_the_checkout_and_the_cpu_build() -> None:
    assert "install: " + packages.MODELS_EXTRA == INSTALL_MODELS
    assert "install: " + packages.METRICS_EXTRA == INSTALL_METRICS
    assert packages.CORE == f"{sys.executable} -m pip install -e {REPO}"


def test_without_torch_validate_names_the_model_the_metric_and_the_commands(tmp_path) -> None:
    path = _config(tmp_path, bertscore=True)
    res = _cli("validate", str(path), script=WITHOUT_TORCH)
    assert res.returncode == ExitCode.USAGE, res.stderr[-3000:]
    lines = _problems(res)
    assert lines == [
        "models.0.kind: model 'qwen' (hf_audio_lm) needs torch, which do not import here; " + INSTALL_MODELS,
        "protocols.0.metrics.names: bertscore: needs bert_score, torch, which do not import here; "
        + INSTALL_METRICS], res.stderr
    # where torch and bert_score are present the same config is fine: the lines above are the packages' doing
    ok = _cli("validate", str(path))
    assert ok.returncode == ExitCode.OK, ok.stderr[-3000:]


def test_without_torch_run_exits_2_before_ray(tmp_path) -> None:
    res = _cli("run", str(_config(tmp_path)), script=WITHOUT_TORCH)
    assert res.returncode == ExitCode.USAGE, res.stderr[-3000:]
    assert "the run started" not in res.stderr
    assert _problems(res) == ["models.0.kind: model 'qwen' (hf_audio_lm) needs torch, which do not import here; "
                              + INSTALL_MODELS]


@pytest.mark.parametrize("python,says", [
    ("/nonexistent/bin/python", "/nonexistent/bin/python does not exist"),
    (sys.executable, "which does not import it; rebuild .venv-vllm: bash scripts/build_vllm_venv.sh"),
])
def test_vllm_is_asked_of_the_interpreter_that_will_run_it(tmp_path, python, says) -> None:
    import importlib.util

    if python == sys.executable and importlib.util.find_spec("vllm") is not None:
        pytest.skip("this interpreter imports vllm")
    res = _cli("validate", str(_config(tmp_path, kind="vllm_audio_lm")), env={"EVALCORE_VLLM_PYTHON": python})
    assert res.returncode == ExitCode.USAGE, res.stderr[-3000:]
    (line,) = _problems(res)
    assert line.startswith(f"models.0.kind: model 'qwen' (vllm_audio_lm) needs vllm in {python}") and says in line


def test_vllm_in_its_venv_passes(tmp_path) -> None:
    venv = REPO / ".venv-vllm" / "bin" / "python"
    if not venv.exists():
        pytest.skip("no .venv-vllm in this checkout (docs/testing.md)")
    res = _cli("validate", str(_config(tmp_path, kind="vllm_audio_lm")), env={"EVALCORE_VLLM_PYTHON": str(venv)})
    assert res.returncode == ExitCode.OK, res.stderr[-3000:]


def test_an_interpreter_with_vllm_but_without_evalcore_is_named(tmp_path) -> None:
    """Finding 4: ``EVALCORE_VLLM_PYTHON`` was checked for vllm only; an interpreter without evalcore passed
    validate, then the run died after its engine actors started and advised ``--resume``, which cannot help."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")  # vllm is there; evalcore is not (no site-packages: -S)
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text(f'#!/bin/sh\ncd /\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n')  # not from the clone
    python.chmod(0o755)
    res = _cli("validate", str(_config(tmp_path, kind="vllm_audio_lm")), env={"EVALCORE_VLLM_PYTHON": str(python)})
    assert res.returncode == ExitCode.USAGE, res.stderr[-3000:]
    (line,) = _problems(res)
    assert line.startswith(f"models.0.kind: model 'qwen' (vllm_audio_lm) needs evalcore in {python} too"), line
    assert "pip install -e" in line and "PYTHONPATH" in line


def test_without_torch_the_mmau_pro_judge_is_named_by_validate_and_run(tmp_path) -> None:
    """MMAU-Pro's published judge embeds with NV-Embed-v2 (torch): without torch, validate names the judge and the
    command, and run stops there before Ray (it was a whole benchmark of error rows, exit 0); with the bag-of-words
    stand-in it needs nothing."""
    cfg = {"name": "pkgs", "storage": {"root": str(tmp_path / "run")},
           "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 2}}],
           "models": [{"name": "listener", "kind": "dsp_listener"}],
           "protocols": [{"name": "mcq", "judge": {"kind": "mcq_mmau_pro"}}]}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    line = ("protocols.0.judge.kind: judge of protocol 'mcq' (mcq_mmau_pro) needs torch, which do not import here; "
            + INSTALL_MODELS)
    for command in ("validate", "run"):
        res = _cli(command, str(path), script=WITHOUT_TORCH)
        assert res.returncode == ExitCode.USAGE and _problems(res) == [line], res.stderr[-3000:]
        assert "the run started" not in res.stderr
    cfg["protocols"][0]["judge"]["params"] = {"embedder": "bag-of-words"}
    path.write_text(yaml.safe_dump(cfg))
    res = _cli("validate", str(path), script=WITHOUT_TORCH)
    assert res.returncode == ExitCode.OK, res.stderr[-3000:]


def test_a_mir_protocol_needs_its_rules_libraries(tmp_path, monkeypatch) -> None:
    """The released rules' libraries (mir_eval, jiwer, …) are checked as a model's packages are."""
    from evalcore.runconfig import preflight
    from evalcore.runconfig.config import parse_config

    cfg = parse_config({"name": "mir", "datasets": [{"name": "cmi", "kind": "cmi_bench",
                                                     "params": {"root": str(tmp_path), "tasks": ["GS_key"]}}],
                        "models": [{"name": "listener", "kind": "dsp_listener"}],
                        "protocols": [{"name": "cmi", "kind": "mir"}]})
    found = packages.importable
    monkeypatch.setattr(packages, "importable", lambda m: m != "mir_eval" and found(m))
    assert preflight.package_problems(cfg) == [
        f"protocols.0.kind: the released rules of protocol 'cmi' need mir_eval, which do not import here; install: "
        f"{packages.CORE}"]
