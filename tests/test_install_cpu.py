"""The CPU install path stays CPU: the command docs/models.md gives for a machine without a GPU (the block after
``<!-- install-cpu -->``) resolves torch to its CPU build, with no CUDA wheel, and the venv the tests run in (the
``dev`` extra, which holds ``cpu``) has that build.

The resolution is pip's own (``pip install --dry-run --ignore-installed --no-deps --report``) over the torch
requirements of the extras the documented command names, read from pyproject.toml, under this machine's pip
configuration: nothing is installed and no wheel is downloaded (pip reads the chosen wheel's metadata). CUDA shows
in a torch build as requirements on ``nvidia-*`` or ``triton`` wheels (the CPU build has none) or a ``+cu`` local
version. The same check of the ``models`` extra alone finds the CUDA build on Linux x86_64: the reason the ``cpu``
extra exists, and proof that the check can fail."""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
CUDA_PARTS = re.compile(r"^(nvidia-|nvidia_|triton\b|cuda-)", re.I)


def documented_extras() -> list[str]:
    """The extras of the install command after ``<!-- install-cpu -->`` in docs/models.md."""
    text = (REPO / "docs" / "models.md").read_text(encoding="utf-8")
    block = text.split("<!-- install-cpu -->", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    (command,) = [ln for ln in block.splitlines() if "pip install" in ln]
    return re.search(r'-e "\.\[([^\]]+)\]"', command).group(1).split(",")


def torch_requirements(extras: list[str]) -> list[str]:
    """The torch requirements of ``extras`` (pyproject's optional dependencies, ``evalcore[...]`` expanded)."""
    optional = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    out, todo, seen = [], list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for spec in optional[extra]:
            req = Requirement(spec)
            if req.name == "evalcore":
                todo += sorted(req.extras)
            elif req.name == "torch":
                out.append(spec)
    return sorted(set(out))


def cuda_parts(name: str, version: str, requires: list[str]) -> list[str]:
    """What makes a torch build a CUDA build: its nvidia/triton requirements and a ``+cu`` local version."""
    parts = [r for r in requires if CUDA_PARTS.match(Requirement(r).name) and "extra ==" not in r]
    return parts + ([f"{name} {version}"] if "+cu" in version else [])


def resolve(requirements: list[str]) -> dict:
    """pip's choice of a wheel for ``requirements`` (dry run, nothing installed): the report's torch entry."""
    res = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
                          "--quiet", "--report", "-", *requirements], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    (torch,) = [i for i in json.loads(res.stdout)["install"] if i["metadata"]["name"] == "torch"]
    return torch


def test_the_documented_cpu_command_names_the_cpu_extra_and_dev_holds_it() -> None:
    extras = documented_extras()
    assert "cpu" in extras and "models" in extras
    pins = torch_requirements(["cpu"])
    assert len(pins) == 1 and "==" in pins[0], pins  # one exact release: the build pip finds for it is checked below
    assert pins[0] in torch_requirements(["dev"])  # the tests' venv is installed through the same pin


def test_pip_resolves_the_documented_command_to_torchs_cpu_build() -> None:
    torch = resolve(torch_requirements(documented_extras()))
    meta = torch["metadata"]
    assert cuda_parts("torch", meta["version"], meta.get("requires_dist") or []) == [], torch["download_info"]["url"]


@pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64",
                    reason="torch's PyPI wheels carry CUDA on Linux x86_64 only")
def test_without_the_cpu_extra_pip_takes_a_cuda_build() -> None:
    """The negative control: the models extra alone resolves to a CUDA build, which the check above would refuse."""
    torch = resolve(torch_requirements(["models"]))
    meta = torch["metadata"]
    assert cuda_parts("torch", meta["version"], meta.get("requires_dist") or []), meta["version"]


def test_the_tests_venv_has_torchs_cpu_build_and_no_cuda_wheel() -> None:
    try:
        dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        pytest.skip("torch is not installed (pip install -e \".[dev]\")")
    assert cuda_parts("torch", dist.version, dist.requires or []) == [], dist.version
    cuda = sorted(d.metadata["Name"] for d in metadata.distributions() if CUDA_PARTS.match(d.metadata["Name"] or ""))
    assert cuda == [], cuda
