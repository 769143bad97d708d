"""A nightly killed mid-evaluation (SIGKILL, its Ray with it) holds a lease that nobody renews: the next
nightly takes it over once it expires and resumes the run: it sends only the requests the dead one had
not committed, counts the others as committed earlier, and records the checkpoint under its own lease."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

import resume_helpers as rh
from evalcore.nightly.lease import Leases
from evalcore.nightly.ledger import Ledger

pytestmark = [pytest.mark.slow, pytest.mark.ray]
N_ITEMS = 16
LEASE_S = 4.0


def _nightly_config(tmp, prefix: str, root: str) -> dict:
    run = rh.run_config("takeover", str(tmp / "items.jsonl"), root, tmp / "unused")
    model = run["models"][0]
    return {"name": "takeover", "datasets": run["datasets"], "protocols": run["protocols"], "stats": run["stats"],
            "ray": run["ray"], "storage": {"root": root},
            "series": [{"name": "slow", "prefix": prefix, "ready_marker": "_SUCCESS",
                        "model": {"kind": model["kind"], "params": {}, "checkpoint_param": "log_dir",
                                  "resources": model["resources"]}}],
            "lease_seconds": LEASE_S}


def _nightly(cfg_path, env: dict, cwd, name: str) -> subprocess.Popen:
    with open(cwd / f"{name}.out", "wb") as out, open(cwd / f"{name}.err", "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "evalcore.cli", "nightly", str(cfg_path)], env=env, cwd=cwd,
                                stdout=out, stderr=err, start_new_session=True)


def test_a_killed_holder_is_taken_over_after_expiry_and_the_run_resumes(tmp_path) -> None:
    ray_tmp = tempfile.mkdtemp(prefix="ecnt", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    try:
        env = rh.plugin_env(tmp_path / "plugin", ray_tmp)
        (tmp_path / "audio").mkdir()
        uris = []
        for i in range(N_ITEMS):
            (tmp_path / "audio" / f"c{i:02d}.wav").write_bytes(rh.clip(i))
            uris.append(str(tmp_path / "audio" / f"c{i:02d}.wav"))
        (tmp_path / "items.jsonl").write_text(rh.jsonl(rh.items(uris)))
        ck = tmp_path / "checkpoints" / "step-1"  # the test model logs its calls into its "checkpoint"
        ck.mkdir(parents=True)
        (ck / "_SUCCESS").write_text("")
        root = str(tmp_path / "nightly")
        cfg_path = tmp_path / "nightly.yaml"
        cfg_path.write_text(yaml.safe_dump(_nightly_config(tmp_path, str(tmp_path / "checkpoints"), root)))
        run_root = f"{root}/runs/slow/step-1"

        first = _nightly(cfg_path, {**env, rh.DELAY_ENV: "0.15"}, tmp_path, "first")
        rh.kill_at_first_commit(first, run_root, tmp_path / "first.err", timeout=240)
        rh.kill_leftovers(ray_tmp)
        ledger = Ledger(root, Leases())
        dead, _ = ledger.leases.read(ledger.lease_path("slow", "step-1"))
        assert dead is not None and ledger.get("slow", "step-1")["status"] == "running"
        time.sleep(max(0.0, float(dead["expires"]) - time.time()) + 0.5)  # nobody renews it now

        second = _nightly(cfg_path, {**env, rh.DELAY_ENV: "0.005"}, tmp_path, "second")
        second.wait(timeout=400)
        err = (tmp_path / "second.err").read_text(errors="replace")
        assert second.returncode == 0, err[-4000:]
        night = json.loads((tmp_path / "nightly" / "nightly.json").read_text())
        c = night["counts"]
        assert (c["evaluated"], c["resumed"], c["failed"], c["leased_elsewhere"]) == (1, 1, 0, 0), c
        assert c["requests_committed_earlier"] > 0 and c["requests_sent"] > 0
        assert c["requests_committed_earlier"] + c["requests_sent"] == rh.n_requests(N_ITEMS), c
        rec = ledger.get("slow", "step-1")
        assert rec["status"] == "finished" and rec["attempts"] == 2 and rec["lease_token"] != dead["token"]
        assert "listener" not in err and "slow/step-1: unchanged" in err  # the console names tonight's verdict
        print("\ntakeover figures:", json.dumps(c))
    finally:
        rh.kill_leftovers(ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
