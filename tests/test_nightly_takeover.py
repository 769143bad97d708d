"""A nightly that stalls mid-evaluation (its driver stopped with SIGSTOP) holds a lease that nobody renews: the next
nightly takes it over once it expires and resumes the run: it sends only the requests the stalled one had not
committed, counts the others as committed earlier, and records the checkpoint under its own lease. When the stalled
holder wakes up (SIGCONT) it stops at its next commit (the run root is claimed by the later attempt), writes nothing
shared, and its exit and message say so: committed rows = requests, one attempt's view in every shared file."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

import resume_helpers as rh
from evalcore.nightly.lease import Leases
from evalcore.nightly.ledger import Ledger
from evalcore.pipeline import commit

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


def _stop_at_first_commit(proc: subprocess.Popen, run_root: str, err, timeout: float = 240) -> None:
    """SIGSTOP the nightly's driver once a shard is committed, then wait until its Ray workers' tasks in flight have
    committed what they will (no new marker for 3 s): the driver alone is stalled, as a stopped machine's would be."""
    deadline = time.monotonic() + timeout
    while not commit.shard_markers(run_root):
        assert proc.poll() is None, f"ended before any commit: {err.read_text(errors='replace')[-3000:]}"
        assert time.monotonic() < deadline, f"no shard committed in {timeout:.0f} s"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGSTOP)
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() - quiet_since < 3 and time.monotonic() < deadline:
        n = len(commit.shard_markers(run_root, index=False))
        if n != seen:
            seen, quiet_since = n, time.monotonic()
        time.sleep(0.2)


def _shared(root) -> dict[str, bytes]:
    """The files every nightly of the root shares, as bytes (the run's run.json among them)."""
    return {f: (root / f).read_bytes() for f in ("nightly.json", "dashboard.html", "dashboard.md", "regressions.parquet",
                                                 "runs/slow/step-1/run.json", "runs/slow/step-1/report.md")}


def test_a_stalled_holder_is_taken_over_after_expiry_and_stops_when_it_wakes(tmp_path) -> None:
    tmp_first = tempfile.mkdtemp(prefix="ecnt1", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    tmp_second = tempfile.mkdtemp(prefix="ecnt2", dir="/tmp")
    first = None
    try:
        env = rh.plugin_env(tmp_path / "plugin", tmp_first)
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
        _stop_at_first_commit(first, run_root, tmp_path / "first.err")
        ledger = Ledger(root, Leases())
        stalled, _ = ledger.leases.read(ledger.lease_path("slow", "step-1"))
        assert stalled is not None and ledger.get("slow", "step-1").status == "running"
        time.sleep(max(0.0, float(stalled["expires"]) - time.time()) + 0.5)  # nobody renews it now

        second = _nightly(cfg_path, {**env, "RAY_TMPDIR": tmp_second, rh.DELAY_ENV: "0.005"}, tmp_path, "second")
        second.wait(timeout=400)
        err = (tmp_path / "second.err").read_text(errors="replace")
        assert second.returncode == 0, err[-4000:]
        night = json.loads((tmp_path / "nightly" / "nightly.json").read_text())
        c = night["counts"]
        assert (c["evaluated"], c["resumed"], c["failed"], c["leased_elsewhere"]) == (1, 1, 0, 0), c
        assert c["requests_committed_earlier"] > 0 and c["requests_sent"] > 0
        assert c["requests_committed_earlier"] + c["requests_sent"] == rh.n_requests(N_ITEMS), c
        rec = ledger.get("slow", "step-1")
        assert rec.status == "finished" and rec.attempts == 2 and rec.lease_token != stalled["token"]
        assert "listener" not in err and "slow/step-1: unchanged" in err  # the console names tonight's verdict
        shared = _shared(tmp_path / "nightly")

        os.kill(first.pid, signal.SIGCONT)  # the stalled holder wakes up, its lease long gone
        first.wait(timeout=300)
        woke = (tmp_path / "first.err").read_text(errors="replace")
        assert first.returncode == 1, woke[-4000:]
        assert "the nightly stopped: another nightly took over slow/step-1" in woke, woke[-4000:]
        assert "wrote nothing shared" in woke
        assert _shared(tmp_path / "nightly") == shared  # one attempt's view in every shared file
        assert ledger.get("slow", "step-1") == rec
        markers = commit.shard_markers(run_root)
        assert sum(m["requests"] for m in markers) == rh.n_requests(N_ITEMS)  # committed once each
        assert sum(m["rows"] for m in markers) == rh.n_rows(N_ITEMS)
        attempt = json.loads((tmp_path / "nightly" / "runs" / "slow" / "step-1" / "run.json").read_text())["attempt"]
        assert attempt["requests_sent"] == c["requests_sent"]  # the run's tables are the second attempt's
        print("\ntakeover figures:", json.dumps(c))
    finally:
        if first is not None and first.poll() is None:
            os.kill(first.pid, signal.SIGCONT)
            first.kill()
        rh.kill_leftovers(tmp_first)
        rh.kill_leftovers(tmp_second)
        shutil.rmtree(tmp_first, ignore_errors=True)
        shutil.rmtree(tmp_second, ignore_errors=True)
