"""Shared fixtures: one local Ray runtime per test session (started on demand)."""

from __future__ import annotations

import os
import pathlib
from typing import NamedTuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")


@pytest.fixture(scope="session")
def local_ray():
    """A local Ray runtime bound to 127.0.0.1 with 2 CPUs, shut down at the end of the session."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


# The suite's session demo run (the same fixture as on branch `suite`, where test_demo_golden and test_pipeline_e2e
# read it too): at the merge keep one copy of it.
class DemoRun(NamedTuple):
    cfg: object  # evalcore.config.RunConfig
    result: object  # evalcore.pipeline.outcome.RunResult


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, local_ray) -> DemoRun:
    """The embedded demo (``evalcore/configs/demo.yaml`` as shipped, rooted in a temporary directory), run once per
    session: ``(cfg, result)``. Its root is shared: a test reads it, and copies it before writing anything there."""
    import yaml

    from evalcore.config import demo_config_path, parse_config
    from evalcore.pipeline.run import run

    data = yaml.safe_load(demo_config_path().read_text())
    data["storage"] = {"root": str(tmp_path_factory.mktemp("demo") / "run")}
    data.setdefault("ray", {})["progress_bars"] = False
    cfg = parse_config(data)
    return DemoRun(cfg, run(cfg))
