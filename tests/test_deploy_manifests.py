"""The deployment files agree with the code: the image builds from files that exist, the RayJob runs
the nightly entrypoint on the config the ConfigMap mounts, that config is a valid evalcore nightly config,
the RayCronJob schedules the same RayJob spec, and every KubeRay manifest validates against KubeRay's CRD
schemas (gzip copies in tests/data/k8s-crds/, checked against ../shared/k8s-crds/ where that exists)."""

from __future__ import annotations

import functools
import gzip
import re
import shlex
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml

from conftest import REPO
from evalcore.nightly.config import parse_nightly

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


def test_the_image_carries_what_the_nightly_needs() -> None:
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("matplotlib") for d in deps) and any(d.startswith("scipy") for d in deps)
    text = DOCKERFILE.read_text()
    assert re.search(r'pip install --no-cache-dir "\.\[', text)  # the project with its base dependencies
    assert "import matplotlib, markdown_it, scipy, evalcore.nightly.night" in text


def test_rayjob_runs_the_entrypoint_on_the_mounted_config() -> None:
    (job,) = _docs("rayjob.yaml")
    assert (job["apiVersion"], job["kind"]) == ("ray.io/v1", "RayJob")
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["rayClusterSpec"]["rayVersion"] == ray.__version__
    argv = shlex.split(spec["entrypoint"])
    assert argv[0] == "python" and argv[1] == f"{WORKDIR}/jobs/nightly.py"
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


def test_nightly_config_is_a_valid_nightly_config_whose_models_fit_a_gpu_worker() -> None:
    (cm,) = _docs("nightly-config.yaml")
    cfg = parse_nightly(yaml.safe_load(cm["data"]["nightly.yaml"]))
    (series,) = cfg.series
    assert series.model.kind == "hf_audio_lm" and series.prefix.startswith("s3://") and series.ready_marker
    assert cfg.root.startswith("s3://") and cfg.max_error_rate == 0.05 and cfg.fail_on_regression
    (job,) = _docs("rayjob.yaml")
    worker = job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    per_node_gpus = int(worker["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    r = series.model.resources  # one actor must fit one worker; concurrency spreads actors over workers
    assert r.num_gpus <= per_node_gpus and r.concurrency * r.num_gpus <= per_node_gpus * worker["maxReplicas"]


def test_raycronjob_schedules_the_rayjob_spec_and_no_kubectl_cronjob_is_left() -> None:
    (cron,) = _docs("raycronjob.yaml")
    (job,) = _docs("rayjob.yaml")
    assert (cron["apiVersion"], cron["kind"]) == ("ray.io/v1", "RayCronJob")
    assert cron["spec"]["schedule"] == "0 2 * * *" and cron["spec"]["timeZone"] == "Etc/UTC"
    assert cron["spec"]["suspend"] is False
    assert cron["spec"]["jobTemplate"] == job["spec"]  # one nightly, by hand or on schedule
    kinds = {(d["apiVersion"], d["kind"]) for f in K8S.glob("*.yaml") for d in _docs(f.name)}
    assert not kinds & {("batch/v1", "CronJob"), ("rbac.authorization.k8s.io/v1", "Role")}


CRDS = REPO / "tests" / "data" / "k8s-crds"
SHARED_CRDS = REPO.parent / "shared" / "k8s-crds"
CRD_FILES = {"RayJob": "ray.io_rayjobs.yaml", "RayCronJob": "ray.io_raycronjobs.yaml",
             "RayCluster": "ray.io_rayclusters.yaml"}


@functools.lru_cache(maxsize=None)
def _schema(kind: str, version: str = "v1") -> dict:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the CRDs are megabytes of YAML
    crd = yaml.load(gzip.decompress((CRDS / (CRD_FILES[kind] + ".gz")).read_bytes()), Loader=loader)
    assert crd["spec"]["names"]["kind"] == kind
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return v["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_the_crd_copies_are_kuberays_unchanged(kind) -> None:
    data = gzip.decompress((CRDS / (CRD_FILES[kind] + ".gz")).read_bytes())
    assert len(data) > 100_000 and (CRDS / (CRD_FILES[kind] + ".gz")).stat().st_size < 100_000
    if SHARED_CRDS.is_dir():
        assert data == (SHARED_CRDS / CRD_FILES[kind]).read_bytes()


def test_every_kuberay_manifest_validates_against_its_crd_schema() -> None:
    seen = []
    for f in sorted(K8S.glob("*.yaml")):
        for doc in _docs(f.name):
            if doc.get("apiVersion", "").startswith("ray.io/"):
                jsonschema.Draft7Validator(_schema(doc["kind"], doc["apiVersion"].split("/")[1])).validate(doc)
                seen.append(doc["kind"])
    assert {"RayJob", "RayCronJob"} <= set(seen)


def test_the_schema_check_rejects_a_broken_raycronjob() -> None:
    (cron,) = _docs("raycronjob.yaml")
    broken = {**cron, "spec": {**cron["spec"], "suspend": "no"}}
    with pytest.raises(jsonschema.ValidationError, match="is not of type 'boolean'"):
        jsonschema.Draft7Validator(_schema("RayCronJob")).validate(broken)
    missing = {**cron, "spec": {k: v for k, v in cron["spec"].items() if k != "schedule"}}
    with pytest.raises(jsonschema.ValidationError, match="'schedule' is a required property"):
        jsonschema.Draft7Validator(_schema("RayCronJob")).validate(missing)


def test_the_run_job_reads_and_writes_s3_only_and_cleans_up_after_itself() -> None:
    """k8s/rayjob-run.yaml: one evaluation run (jobs/run_eval.py) on a RayCluster whose pods share no disk: its run
    root is an s3:// --out, everything a worker reads is on S3 (no placement problem on a cluster of several nodes),
    and KubeRay deletes the cluster when the job ends and the RayJob after a while."""
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline import placement
    from evalcore.pipeline.llm_resources import with_run_llm_roots

    (job,) = _docs("rayjob-run.yaml")
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] > 0
    assert spec["activeDeadlineSeconds"] > 0 and spec["rayClusterSpec"]["rayVersion"] == ray.__version__
    argv = shlex.split(spec["entrypoint"])
    assert argv[:2] == ["python", f"{WORKDIR}/jobs/run_eval.py"] and (REPO / "jobs" / "run_eval.py").is_file()
    out = argv[argv.index("--out") + 1]
    assert out.startswith("s3://")
    (cm,) = _docs("run-config.yaml")
    config_path = Path(argv[2])
    cluster = spec["rayClusterSpec"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    for pod in [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]:
        vols = {v["name"]: v for v in pod["spec"]["volumes"]}
        for c in _containers(pod):
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert vols[mounts[str(config_path.parent)]]["configMap"]["name"] == cm["metadata"]["name"]
            assert all("secretRef" in e for e in c.get("envFrom", [])) and not c.get("env")
    cfg = parse_config(yaml.safe_load(cm["data"][config_path.name]))
    cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"root": out})})
    spread = placement.Nodes(alive=3, driver="head", driver_cpus=0.0)  # the head schedules only: work goes elsewhere
    assert spread.spread
    assert placement.validate_problems(with_run_llm_roots(cfg), spread) == []
    # the same config with a checkpoint on the head's disk is refused, naming the field
    local = cfg.model_copy(update={"models": [cfg.models[0].model_copy(update={
        "params": {**cfg.models[0].params, "checkpoint": "/home/ray/ckpt"}})]})
    (line,) = placement.config_problems(local, spread)
    assert line.startswith("models.0.params.checkpoint: /home/ray/ckpt is a local path")
