"""Research models with their own dependency pins, behind the MusicLM interface (``isolated``).

MU-LLaMA, SALMONN, LTU-AS or LLaMA-Adapter each ship a repository pinned to its own torch /
transformers / peft versions, which conflict with each other and with evalcore's. Such a model runs
through a small **adapter** inside actors that Ray starts in the model's own ``runtime_env`` (set
``runtime_env`` on the model in the run config: ``pip``, ``conda``, ``container``/``image_uri``,
``working_dir``/``py_modules``, ``py_executable``). Only that model's actor pool gets it; the driver,
the decode tasks and the other models keep their environment.

The adapter protocol (a plain class; it needs nothing from evalcore, only numpy):

``__init__(self, checkpoint_dir: str | None, sample_rate: int, **adapter_params)``
    Load the model once (once per actor). ``checkpoint_dir`` is the local copy of ``checkpoint``
    (local path or ``s3://`` prefix, copied once per actor) or None.
``generate(self, audios: list[numpy.ndarray | None], prompts: list[str]) -> list[str]``
    One answer per input, in order. ``audios[i]`` is mono float32 at ``sample_rate`` (already
    resampled and cut to ``max_audio_seconds`` windows by the pipeline), or None for a text-only
    request. Raising fails the batch; the pipeline then retries its inputs one by one, so only
    the bad input becomes an error row.
``info(self) -> dict`` (optional)
    Anything identifying the model beyond the checkpoint (repository commit, package versions);
    recorded under ``adapter_info`` in every response's ``model_info``.

Params of ``isolated``: ``adapter`` (``"module.path:ClassName"``, importable in the runtime env,
e.g. from its ``working_dir``), ``adapter_params`` (dict), ``sample_rate``, ``max_audio_seconds``,
``checkpoint``, ``revision``, ``cache_dir``. The actor's environment (``sys.prefix``, executable,
Python version) is recorded in ``model_info["environment"]``.

What the runtime env must contain: the actor is a Ray Data actor running evalcore's model stage,
so it needs ``ray`` (the cluster's version), ``pyarrow``, ``numpy`` and ``evalcore`` itself
besides the research code. Ray's ``pip`` env inherits the base environment's packages (pins
override them); a ``conda`` env or a container must install ``evalcore`` and the same ``ray``;
a ``py_executable`` venv can reuse the base packages through a ``.pth`` file (see
``docs/models.md`` and ``tests/test_models_isolated.py``).
"""

from __future__ import annotations

import importlib
import platform
import sys
from typing import Any, Sequence

from evalcore.models.base import MODELS, AudioPrompt, MusicLM
from evalcore.models.checkpoint import resolve_checkpoint
from evalcore.core.params import NonEmpty, PathStr, Rate, Seconds


def load_adapter_class(spec: str) -> type:
    """``"package.module:ClassName"`` → the class (imported in this, i.e. the isolated, environment)."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"isolated params.adapter: expected 'module.path:ClassName', got {spec!r}")
    try:
        mod = importlib.import_module(module)  # dynamic: the user's adapter module named in the config
    except ImportError as e:
        raise ImportError(f"isolated params.adapter: cannot import {module!r} in this environment "
                          f"(sys.prefix={sys.prefix}): {e}; is the model's runtime_env set?") from e
    try:
        cls = getattr(mod, name)
    except AttributeError:
        raise ValueError(f"isolated params.adapter: module {module!r} has no {name!r}") from None
    if not callable(getattr(cls, "generate", None)):
        raise TypeError(f"isolated params.adapter: {spec} has no generate(audios, prompts) method")
    return cls


def environment() -> dict[str, str]:
    """Where this process runs: the isolation the adapter got."""
    return {"sys_prefix": sys.prefix, "executable": sys.executable, "python": platform.python_version()}


@MODELS.register("isolated")
class IsolatedModel(MusicLM):
    """A research model behind an adapter, run in its model's own Ray runtime_env."""
    path_params = {"checkpoint": "dir"}  # must exist (evalcore validate)

    def __init__(
        self,
        adapter: NonEmpty,
        adapter_params: dict[str, Any] | None = None,
        sample_rate: Rate = 16_000,
        max_audio_seconds: Seconds | None = None,
        checkpoint: PathStr | None = None,
        revision: str | None = None,
        cache_dir: PathStr | None = None,
    ) -> None:
        if adapter_params is not None and not isinstance(adapter_params, dict):
            raise ValueError("isolated params.adapter_params: expected a mapping")
        self.sample_rate = int(sample_rate)
        self.max_audio_seconds = max_audio_seconds
        self.adapter_spec = adapter
        self.ckpt = resolve_checkpoint(checkpoint, revision, cache_dir) if checkpoint else None
        cls = load_adapter_class(adapter)
        self.adapter = cls(checkpoint_dir=self.ckpt.local_dir if self.ckpt else None, sample_rate=self.sample_rate,
                           **(adapter_params or {}))

    def info(self) -> dict[str, Any]:
        extra = self.adapter.info() if callable(getattr(self.adapter, "info", None)) else {}
        return {**super().info(), "backend": f"IsolatedModel[{self.adapter_spec}]",
                "checkpoint": self.ckpt.identity() if self.ckpt else None,
                "adapter_info": extra, "environment": environment()}

    def generate(self, batch: Sequence[AudioPrompt]) -> list[str]:
        for inp in batch:
            if inp.audio is not None and inp.sample_rate != self.sample_rate:
                raise ValueError(f"audio at {inp.sample_rate} Hz, the adapter takes {self.sample_rate} Hz")
        out = self.adapter.generate([inp.audio for inp in batch], [inp.prompt for inp in batch])
        return list(out)
