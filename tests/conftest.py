"""Shared fixtures: one local Ray runtime per test session (started on demand)."""

from __future__ import annotations

import os
import pathlib

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
