"""Run-level LLM resources: cache and request log under the run's root; named budgets held by the driver."""

from __future__ import annotations

import json
import time

import pytest

from evalcore.runconfig.config import parse_config
from evalcore.llm.budget import Lease, RayBudget
from evalcore.llm.runner import CACHE_ENV
from evalcore.pipeline.llm_resources import hold_budgets, with_run_llm_roots
from evalcore.pipeline.run import run
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

install_test_key()  # at import, before the session's Ray starts: its workers inherit the key


def _endpoint(base_url: str = "http://127.0.0.1:9/v1", **extra) -> dict:
    return {"base_url": base_url, "model": "m", "rpm": 6000, "tpm": 10_000_000, "api_key_env": TEST_API_KEY_ENV,
            "max_retries": 0, "timeout_s": 10, **extra}


def _config(root: str, judge_params: dict, models: list[dict] | None = None) -> dict:
    return {
        "name": "llm-roots",
        "datasets": [{"name": "synth", "kind": "synthetic", "params": {"n_clips": 2, "seconds": 2.0, "seed": 1,
                                                                      "bad_clips": 0}}],
        "models": models or [{"name": "listener", "kind": "dsp_listener",
                              "resources": {"num_cpus": 0.5, "batch_size": 16}}],
        "protocols": [{"name": "mcq", "conditions": ["correct"], "option_orders": 1,
                       "judge": {"kind": "mcq_llm", "params": judge_params}}],
        "storage": {"root": root},
        "stats": {"bootstrap_resamples": 100},
        "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
    }


def test_defaults_name_the_run_root_and_keep_what_is_configured(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    root = str(tmp_path / "run")
    rewrite = {"name": "para", "kind": "reference_rewrite", "params": {"mode": "paraphrase", **_endpoint()}}
    shared = {"name": "para2", "kind": "reference_rewrite",
              "params": {"mode": "paraphrase", **_endpoint(cache_root="s3://b/shared", log_root="s3://b/logs")}}
    listener = {"name": "listener", "kind": "dsp_listener"}
    cfg = with_run_llm_roots(parse_config(_config(root, _endpoint(), [listener, rewrite, shared])))
    judge = cfg.protocols[0].judge.params
    assert judge["cache_root"] == root and judge["log_root"] == root
    by_name = {m.name: m.params for m in cfg.models}
    assert by_name["para"]["cache_root"] == root and by_name["para"]["log_root"] == root
    assert by_name["para2"]["cache_root"] == "s3://b/shared" and by_name["para2"]["log_root"] == "s3://b/logs"
    assert "cache_root" not in by_name["listener"] and "log_root" not in by_name["listener"]  # not LLM-backed

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env-cache"))  # a cache configured for all runs is kept
    judge = with_run_llm_roots(parse_config(_config(root, _endpoint()))).protocols[0].judge.params
    assert "cache_root" not in judge and judge["log_root"] == root


@pytest.mark.ray
def test_a_run_writes_its_llm_cache_and_log_under_its_root(tmp_path, monkeypatch, local_ray) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with LLMServer(answer=lambda messages: "A") as srv:
        cfg = parse_config(_config(str(tmp_path / "run"), _endpoint(srv.base_url)))
        res = run(cfg)
        sent = len(srv.requests)
    assert res.counts["requests_in"] == res.counts["requests_scored"] > 0
    assert sent > 0
    cached = list((tmp_path / "run" / "llm-cache").rglob("*.json"))
    assert len(cached) == sent  # every answer the server gave is in the run's cache
    logged = [json.loads(line) for p in (tmp_path / "run" / "llm-log").glob("*.jsonl")
              for line in p.read_text().splitlines()]
    assert sum(1 for e in logged if not e["cached"] and e.get("text") is not None) == sent
    assert not (tmp_path / ".evalcore-llm-cache").exists()


@pytest.mark.ray
def test_the_driver_holds_one_budget_per_name(tmp_path, local_ray) -> None:
    ray = local_ray
    rewrite = {"name": "para", "kind": "reference_rewrite",
               "params": {"mode": "paraphrase", **_endpoint(budget="run-budget-a")}}
    audio = {"name": "remote", "kind": "openai_audio_chat", "params": {**_endpoint(budget="run-budget-b")}}
    cfg = parse_config(_config(str(tmp_path / "run"), _endpoint(budget="run-budget-a"),
                               [{"name": "listener", "kind": "dsp_listener"}, rewrite, audio]))
    held = hold_budgets(cfg)
    try:
        assert sorted(b.name for b in held) == ["run-budget-a", "run-budget-b"]
        assert ray.get_actor("run-budget-a") and ray.get_actor("run-budget-b")  # workers find them by name
        assert held[0].stats()["granted"] == 0
    finally:
        for b in held:
            b.kill()


@pytest.mark.ray
def test_a_budget_whose_creator_is_gone_is_opened_again(local_ray) -> None:
    ray = local_ray
    name = "budget-of-a-gone-worker"

    @ray.remote(num_cpus=0)
    class Creator:
        def make(self) -> bool:
            self.budget = RayBudget(name, rpm=600, tpm=10**6)
            return True

    creator = Creator.remote()
    ray.get(creator.make.remote())
    found = RayBudget(name, rpm=600, tpm=10**6)  # by name: does not keep the actor alive
    assert isinstance(found.acquire(1), Lease)
    ray.kill(creator)  # its budget actor goes with it
    deadline = time.monotonic() + 30
    while True:
        try:
            ray.get_actor(name)
        except ValueError:
            break
        assert time.monotonic() < deadline, "the budget actor outlived its creator"
        time.sleep(0.2)
    assert isinstance(found.acquire(1), Lease)  # reopened, not an ActorDiedError
    assert found.stats()["granted"] == 1
    found.kill()
