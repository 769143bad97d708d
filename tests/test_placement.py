"""Where a run's files must lie on a Ray cluster of several nodes (evalcore/pipeline/placement.py, issue 47): what the
workers read — audio, checkpoints, a judge's or a metric's files, LLM caches and logs — on s3:// or under
``storage.shared_paths``, one line per field otherwise; nothing asked of a single node; a node lost said once."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from evalcore.runconfig.config import parse_config
from evalcore.pipeline import placement
from evalcore.pipeline.llm_resources import with_run_llm_roots

SPREAD = placement.Nodes(alive=3, driver="head", driver_cpus=0.0)
ONE = placement.Nodes(alive=1, driver="head", driver_cpus=8.0)


def _cfg(root: str = "/data/run", shared: list[str] | None = None, checkpoint: str = "s3://b/ckpt",
         judge: dict | None = None) -> object:
    data = {"name": "t", "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 2}}],
            "models": [{"name": "l", "kind": "dsp_listener", "params": {"checkpoint": checkpoint}}],
            "protocols": [{"name": "mcq", **({"judge": judge} if judge else {})}],
            "storage": {"root": root, **({"shared_paths": shared} if shared else {})}}
    return parse_config(data)


def test_spread_means_work_may_run_off_the_drivers_node() -> None:
    assert SPREAD.spread and placement.Nodes(2, "h", 4.0).spread and placement.Nodes(1, "h", 0.0).spread
    assert not ONE.spread
    assert "3 node(s), the driver's node offering no CPU" in SPREAD.describe()


def test_reachable_is_s3_or_under_a_shared_mount() -> None:
    assert placement.reachable("s3://b/x.wav", None)
    assert placement.reachable("/mnt/shared/a/x.wav", ["/mnt/shared"])
    assert not placement.reachable("/mnt/sharedx/x.wav", ["/mnt/shared"])  # whole path segments
    assert not placement.reachable("/tmp/x.wav", None)


def test_a_local_checkpoint_is_named_on_a_cluster_and_passes_on_one_node(tmp_path) -> None:
    (tmp_path / "ckpt").mkdir()
    cfg = _cfg(checkpoint=str(tmp_path / "ckpt"))
    assert placement.config_problems(cfg, ONE) == []
    (line,) = placement.config_problems(cfg, SPREAD)
    assert line.startswith(f"models.0.params.checkpoint: {tmp_path / 'ckpt'} is a local path on a Ray cluster of 3")
    assert "storage.shared_paths" in line
    assert placement.config_problems(_cfg(checkpoint=str(tmp_path / "ckpt"), shared=[str(tmp_path)]), SPREAD) == []


def test_an_llm_judges_cache_and_log_default_to_a_local_run_root_are_named() -> None:
    judge = {"kind": "mcq_llm", "params": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "rpm": 60, "tpm": 10_000}}
    lines = placement.config_problems(with_run_llm_roots(_cfg(judge=judge)), SPREAD)
    assert [line.split(":")[0] for line in lines] == ["protocols.0.judge.params.cache_root",
                                                      "protocols.0.judge.params.log_root"]
    assert all("/data/run (the run root, by default) is a local path" in line for line in lines)
    assert placement.config_problems(with_run_llm_roots(_cfg(root="s3://b/run", judge=judge)), SPREAD) == []


def test_audio_on_a_local_path_is_named_per_dataset_with_how_to_fix_it() -> None:
    cfg = _cfg()
    items = pa.table({"dataset": ["synth"] * 3, "audio_uri": ["/data/run/demo_audio/a.wav", "s3://b/b.wav",
                                                              "/data/run/demo_audio/c.wav"]})
    assert placement.audio_problems(cfg, items, ONE) == []
    (line,) = placement.audio_problems(cfg, items, SPREAD)
    assert line.startswith("datasets.0: 2 item(s) name audio on a local path (e.g. /data/run/demo_audio/a.wav)")
    assert line.endswith("give --out an s3:// URI, or its audio_dir param")


def test_validate_reads_where_a_dataset_will_put_or_find_its_audio(tmp_path) -> None:
    assert placement.validate_problems(_cfg(root="s3://b/run"), SPREAD) == []  # the demo's clips under an s3 root
    (line,) = placement.validate_problems(_cfg(), SPREAD)
    assert line.startswith("datasets.0: 1 audio path(s) it names are on a local path (e.g. /data/run/demo_audio)")
    (tmp_path / "items.jsonl").write_text(json.dumps({"item_id": "q", "protocol": "mcq", "audio_uri": "a.wav",
                                                      "question": "?", "options": ["x", "y"],
                                                      "correct_option": 0}) + "\n")
    cfg = parse_config({"name": "t", "datasets": [{"name": "mine", "kind": "items_file",
                                                   "params": {"path": str(tmp_path / "items.jsonl")}}],
                        "models": [{"name": "p", "kind": "text_prior"}], "protocols": [{"name": "mcq"}],
                        "storage": {"root": "s3://b/run"}})
    (line,) = placement.validate_problems(cfg, SPREAD)
    assert f"(e.g. {tmp_path / 'a.wav'})" in line


def test_a_node_lost_is_said_once(caplog) -> None:
    now = [0.0]
    nodes = [{"n1": "10.0.0.1", "n2": "10.0.0.2", "h": "10.0.0.9"}]
    watch = placement.NodeWatch(every_s=5.0, clock=lambda: now[0], alive=lambda: dict(nodes[0]))
    nodes[0] = {"n1": "10.0.0.1", "h": "10.0.0.9"}
    watch.poll()  # too soon: not looked at
    assert watch.lost == []
    now[0] = 6.0
    with caplog.at_level("WARNING", logger="evalcore"):
        watch.poll()
        now[0] = 12.0
        watch.poll()
        watch.poll(now_or_never=True)
    assert watch.lost == ["n2"]
    assert caplog.text.count("cluster: node 10.0.0.2 (n2) left during the run") == 1


@pytest.mark.parametrize("env, want", [({"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1", "AWS_ENDPOINT_URL": "http://x:2"},
                                        "http://127.0.0.1:1"),
                                       ({"AWS_ENDPOINT_URL": "http://x:2"}, "http://x:2")])
def test_the_s3_endpoint_comes_from_the_environment_as_boto3_reads_it(monkeypatch, env, want) -> None:
    for k in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    cfg = _cfg()
    assert cfg.storage.settings().s3.endpoint_override == want
    assert cfg.storage.s3_options() == {"endpoint_override": want, "region": "eu-west-3", "scheme": None}
    given = parse_config({**cfg.model_dump(mode="json"), "storage": {"s3": {"endpoint_override": "http://c:3"}}})
    assert given.storage.settings().s3.endpoint_override == "http://c:3"  # the config's own wins


def test_a_file_missing_on_a_node_not_the_drivers_is_told_as_such(local_ray, tmp_path) -> None:
    """A decode on another node than the driver's that did not find a local file the driver's node has (asked of it
    by a task pinned there) says which node did not see it, class transient (a mount missing there, not a bad
    input); a file the driver's node lacks too, and an s3:// one, stay missing inputs."""
    import numpy as np

    from evalcore.pipeline.stages import SHARED_AUDIO_FIELD, audio_arrays, shared_audio_table

    seen = tmp_path / "seen.wav"
    seen.write_bytes(b"")
    uris = [str(seen), str(tmp_path / "nowhere.wav"), "s3://b/x.wav"]
    rows = [{"request_id": str(i), "audio_uri": u, "error_stage": "decode", "error_class": "input",
             "error": f"missing: audio file not found: {u}", "audio": None} for i, u in enumerate(uris)]
    heard = np.linspace(-1, 1, 8, dtype=np.float32)  # a row decoded beside them keeps its sound
    rows.append({"request_id": "3", "audio_uri": "s3://b/y.wav", "condition": "correct", "chunk_index": 0,
                 "audio": heard})
    batch = shared_audio_table(rows)
    here = local_ray.get_runtime_context().get_node_id()
    assert placement.elsewhere(batch, here).equals(batch)  # on the driver's node: nothing to tell
    told = placement.elsewhere(batch, here, this_node="f" * 56)
    assert told.schema.field("audio").type == SHARED_AUDIO_FIELD.type
    assert np.array_equal(audio_arrays(told.column("audio"))[3], heard)
    rows = told.to_pylist()[:3]
    assert rows[0]["error"].startswith(f"{placement.NOT_VISIBLE}: audio file not found on node ")
    assert f"which is not the driver's node, where it is: {seen} must be on a path every node mounts" in rows[0]["error"]
    assert rows[0]["error_class"] == "transient"
    assert [(r["error"], r["error_class"]) for r in rows[1:]] == [(f"missing: audio file not found: {u}", "input")
                                                                  for u in uris[1:]]
