"""The deployment files agree with the code: the image builds from files that exist, the RayJob runs
the job entrypoint on the config the ConfigMap mounts, and that config is a valid evalcore config."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import ray
import yaml

from conftest import REPO
from evalcore.config import parse_config

K8S = REPO / "k8s"
DOCKERFILE = REPO / "docker" / "Dockerfile"
WORKDIR = "/home/ray/evalcore"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _containers(pod_template: dict) -> list[dict]:
    return pod_template["spec"]["containers"]


def test_dockerfile_copies_existing_paths_into_the_workdir_and_pins_rays_version() -> None:
    text = DOCKERFILE.read_text()
    assert f"WORKDIR {WORKDIR}" in text
    copies = re.findall(r"^COPY(?: --\S+)* (.+) \S+$", text, flags=re.M)
    assert copies, "no COPY lines"
    for line in copies:
        for src in line.split():
            assert (REPO / src).exists(), f"Dockerfile copies {src}, which is not in the repository"
    base = re.search(r"RAY_IMAGE=rayproject/ray:(\d+\.\d+\.\d+)-py(\d)(\d+)", text)
    assert base and base.group(1) == ray.__version__, "the image's Ray differs from the Ray evalcore pins"
    assert (base.group(2), base.group(3)) == ("3", "11")


def test_rayjob_runs_the_entrypoint_on_the_mounted_config() -> None:
    (job,) = _docs("rayjob.yaml")
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["rayClusterSpec"]["rayVersion"] == ray.__version__
    argv = shlex.split(spec["entrypoint"])
    assert argv[0] == "python" and argv[1] == f"{WORKDIR}/jobs/run_eval.py"
    assert (REPO / argv[1].removeprefix(WORKDIR + "/")).is_file()
    config_path = Path(argv[2])

    # the config path is the ConfigMap's key under the volume mount of every Ray container
    (cm,) = _docs("nightly-config.yaml")
    cluster = spec["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    images = set()
    for pod in pods:
        vols = {v["name"]: v for v in pod["spec"]["volumes"]}
        for c in _containers(pod):
            images.add(c["image"])
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            vol = vols[mounts[str(config_path.parent)]]
            assert vol["configMap"]["name"] == cm["metadata"]["name"]
            assert config_path.name in cm["data"]
            # credentials only from Secrets, never literal values in the manifest
            assert all("secretRef" in e for e in c.get("envFrom", [])) and not c.get("env")
    images |= {c["image"] for c in _containers(spec["submitterPodTemplate"])}
    assert len(images) == 1, f"head, workers and submitter should run one image, got {images}"
    gpu = cluster["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert gpu["nvidia.com/gpu"] == "1"


def test_nightly_config_is_a_valid_run_config_whose_models_fit_a_gpu_worker() -> None:
    (cm,) = _docs("nightly-config.yaml")
    cfg = parse_config(yaml.safe_load(cm["data"]["nightly.yaml"]))
    kinds = {m.name: m.kind for m in cfg.models}
    assert kinds["qwen2-audio-candidate"] == "hf_audio_lm"
    assert {"paraphrase", "adversarial"} <= set(kinds) and cfg.max_error_rate == 0.05
    (job,) = _docs("rayjob.yaml")
    worker = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    per_node_gpus = int(worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    for m in cfg.models:  # one actor must fit one worker; concurrency spreads actors over workers
        assert m.resources.num_gpus <= per_node_gpus
        assert m.resources.concurrency * m.resources.num_gpus <= per_node_gpus * worker["maxReplicas"]


def test_cronjob_creates_the_rayjob_nightly_with_only_the_rights_it_needs() -> None:
    docs = {d["kind"]: d for d in _docs("nightly-cronjob.yaml")}
    cron = docs["CronJob"]
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    (c,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert c["command"][:3] == ["kubectl", "create", "-f"] and c["command"][3].endswith("/rayjob.yaml")
    (rule,) = docs["Role"]["rules"]
    assert rule["resources"] == ["rayjobs"] and "delete" not in rule["verbs"]
