"""Whether the packages a configured component needs import in the environment that will run it.

A registered model or judge says what it needs with two class attributes, checked without importing anything
(``importlib.util.find_spec``: cheap, no import side effects):

* ``requires``: module names, e.g. ``("torch", "transformers")`` for ``hf_audio_lm``;
* ``install_hint``: the command that installs them, e.g. ``pip install -e ".[models]"`` (pyproject's extras).

The hints run from any directory: this interpreter's pip and the checkout's absolute path (``python -m pip install
-e "/abs/clone[models,cpu]"``; ``"evalcore[models]"`` outside a checkout). On a machine without an NVIDIA GPU they
add the ``cpu`` extra, the CPU build of torch: without it pip takes torch's CUDA build (several GB).

A component that runs in another interpreter defines ``packages_problem(params) -> str | None`` instead
(``vllm_audio_lm``: vLLM in the interpreter :func:`evalcore.models.vllm_audio.vllm_python` finds, checked in a
subprocess). A registered free-form metric declares its modules the same way (``requires``,
:class:`evalcore.textmetrics.freeform_metric.FreeformMetric`), all in the ``[metrics]`` extra. ``evalcore validate`` and
``evalcore run``'s preflight (before Ray starts) report each gap as one line naming the component and the command.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterable


def has_gpu() -> bool:
    """An NVIDIA driver is loaded or ``nvidia-smi`` is on PATH (cheap: nothing is imported or run)."""
    return os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None


#: pip of this interpreter (a bare ``pip`` on PATH may install into another one)
PIP_INSTALL = f"{shlex.quote(sys.executable)} -m pip install"


def install(extras: str = "") -> str:
    """The command that installs evalcore with ``extras`` (pyproject's, e.g. ``models``) into this interpreter, from
    any directory; ``cpu`` is added to extras that bring torch on a machine without a GPU."""
    if extras in ("models", "metrics") and not has_gpu():
        extras += ",cpu"
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():  # a checkout (an editable install)
        return f"{PIP_INSTALL} -e " + shlex.quote(f"{root}[{extras}]" if extras else str(root))
    return f"{PIP_INSTALL} " + shlex.quote(f"evalcore[{extras}]" if extras else "evalcore")


#: the installs of pyproject.toml's extras
MODELS_EXTRA = install("models")
METRICS_EXTRA = install("metrics")
CORE = install()


def importable(module: str) -> bool:
    """``module`` can be found in this interpreter (a finder that refuses it, as an import would, counts as no)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing(modules: Iterable[str]) -> list[str]:
    """The ``modules`` this interpreter cannot import, in order."""
    return [m for m in modules if not importable(m)]


def missing_in(python: str, modules: Iterable[str], timeout_s: float = 60.0) -> list[str] | str:
    """The ``modules`` the interpreter at ``python`` cannot import (checked in a subprocess, nothing imported), or a
    line saying why ``python`` could not be asked."""
    modules = list(modules)
    if not os.path.isfile(python):
        return f"{python} does not exist"
    code = ("import importlib.util, sys\n"
            "print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
    try:
        out = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"cannot run {python}: {type(e).__name__}: {str(e)[:200]}"
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return f"{python} failed ({out.returncode}): {last[:200]}"
    return out.stdout.split()


def component_problem(cls: type, params: dict[str, Any]) -> str | None:
    """Why ``cls`` (a registered model or judge) cannot run here with ``params``: the modules it ``requires`` that do
    not import and its ``install_hint``, or what its own ``packages_problem`` says; None when all is there."""
    hook = getattr(cls, "packages_problem", None)
    if callable(hook):
        return hook(params)
    gone = missing(getattr(cls, "requires", ()))
    if not gone:
        return None
    return f"needs {', '.join(gone)}, which do not import here; install: {getattr(cls, 'install_hint', CORE)}"


def metric_problem(requires: Iterable[str]) -> str | None:
    """Why a free-form metric that imports ``requires`` cannot run here (the modules and the install command),
    else None."""
    gone = missing(requires)
    return f"needs {', '.join(gone)}, which do not import here; install: {METRICS_EXTRA}" if gone else None
