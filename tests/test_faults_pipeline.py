"""Whole runs (local Ray) against the scripted server of tests/llm_server.py when things go wrong: the
endpoint goes away mid-run and comes back (``--resume`` finishes the run without repeating committed
work), identical requests in flight on several Ray workers (one call each), and audio refused by
llama.cpp's echoing 500 (small, bounded error tables)."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.runconfig.config import parse_config
from evalcore.core.errors import MAX_REASON_CHARS
from evalcore.pipeline.commit import load_committed
from evalcore.pipeline.run import NothingScored, run
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key, parenthesised_letter

install_test_key()  # at import, before the session's Ray starts: its workers inherit the key
pytestmark = pytest.mark.ray
runner = CliRunner()
#: how long the endpoint stays down (the issue's figure is 40 s: EVALCORE_FAULT_DOWN_S=40)
DOWN_S = float(os.environ.get("EVALCORE_FAULT_DOWN_S", "4"))


def matcher(messages: list[dict]) -> str:
    """The letter the answer puts in parentheses; for a label extraction: one label in and one outside the
    vocabulary."""
    return "guitar, kazoo" if "Vocabulary" in messages[-1]["content"] else parenthesised_letter(messages)


def _judge(srv: LLMServer, **kw) -> dict:
    return {"base_url": srv.base_url, "model": "matcher", "rpm": 60_000, "tpm": 100_000_000,
            "api_key_env": TEST_API_KEY_ENV, "timeout_s": 5, "backoff_base_s": 0.05, "backoff_max_s": 0.1, **kw}


def _config(root: Path, protocols: list[dict], **top) -> dict:
    return {"name": "faults",
            "datasets": [{"name": "synth", "kind": "synthetic",
                          "params": {"n_clips": 4, "seconds": 2.0, "seed": 1, "bad_clips": 0}}],
            "models": [{"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 16}}],
            "protocols": protocols, "storage": {"root": str(root)}, "stats": {"bootstrap_resamples": 100},
            "ray": {"progress_bars": False, "decode_num_cpus": 0.5}, **top}


def _bodies(srv: LLMServer, since: int = 0, status: int | None = None) -> list[str]:
    """The messages of every chat request the server saw (from ``since``), as canonical JSON."""
    return [json.dumps(json.loads(r.body)["messages"], sort_keys=True) for r in srv.requests[since:]
            if "chat/completions" in r.path and (status is None or r.status == status)]


def test_endpoint_down_mid_run_then_resume_finishes_without_repeating_calls(tmp_path, local_ray) -> None:
    with LLMServer(answer=matcher, delay_s=0.1) as srv:
        cfg = _config(tmp_path / "run", [{"name": "mcq", "conditions": ["correct", "text_only"], "option_orders": 2,
                                          "templates": "muchomusic",
                                          "judge": {"kind": "mcq_llm", "params": _judge(srv, max_retries=1)}}],
                      max_error_rate=0.05)
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))

        def outage() -> None:  # the endpoint dies after a few answers and comes back DOWN_S later
            deadline = time.monotonic() + 120
            while srv.chat_calls() < 6 and time.monotonic() < deadline:
                time.sleep(0.01)
            srv.down()
            time.sleep(DOWN_S)
            srv.up()

        t = threading.Thread(target=outage)
        t.start()
        first = runner.invoke(app, ["run", str(tmp_path / "cfg.yaml")])
        t.join()
        n_first = len(srv.requests)
        ok_first = set(_bodies(srv, status=200))
        errors = pq.read_table(tmp_path / "run" / "tables" / "errors.parquet").to_pandas()
        before = {(r["request_id"], r["chunk_index"]): r for r in load_committed(str(tmp_path / "run")).rows}
        second = runner.invoke(app, ["run", "--resume", str(tmp_path / "run")])
        resumed = _bodies(srv, since=n_first)
    after = load_committed(str(tmp_path / "run"))
    retried = {k for k, r in before.items() if r["error"] is not None}
    again = [r for r in after.rows if (r["request_id"], r["chunk_index"]) in retried]
    assert len(retried) == len(errors) == len(again) and after.superseded == len(retried)
    # judged again on the committed answer: the model was not called again (same answer, same timing)
    for r in again:
        old = before[(r["request_id"], r["chunk_index"])]
        assert r["error"] is None and (r["text"], r["generate_s"]) == (old["text"], old["generate_s"])
    assert after.next_attempt == 2
    assert first.exit_code == 4, first.output  # the error budget stopped it
    assert "error budget exceeded" in first.stderr
    assert len(errors) > 0 and set(errors["error_class"]) == {"transient"}
    assert errors["error"].str.startswith("connection error").all() and errors["error"].str.contains(
        r"\(after 2 attempts\)").all()
    assert second.exit_code == 0, second.output
    c = json.loads((tmp_path / "run" / "run.json").read_text())["counts"]
    assert c["requests_in"] == c["requests_scored"] == 4 * 3 * 2 * 2
    assert not set(resumed) & ok_first  # no call for committed work that succeeded
    assert len(resumed) == len(set(resumed)) > 0  # one call per distinct request that had failed
    print(f"\nendpoint down {DOWN_S:.0f} s: first attempt {n_first} calls, {len(errors)} transient error rows; "
          f"--resume made {len(resumed)} calls, all {c['requests_in']} requests scored")


def test_identical_requests_in_flight_on_ray_workers_make_one_call_each(tmp_path, local_ray) -> None:
    with LLMServer(answer=matcher, delay_s=0.3) as srv:
        cfg = parse_config(_config(tmp_path / "run", [
            {"name": "mcq", "conditions": ["correct", "silence", "text_only"], "option_orders": 3,
             "templates": "muchomusic", "judge": {"kind": "mcq_llm", "params": _judge(srv, threads=8)}},
            {"name": "factual", "conditions": ["correct", "silence"],
             "judge": {"kind": "llm_extractor", "params": _judge(srv, vocabulary="instrument")}}]))
        res = run(cfg)
        bodies = _bodies(srv)
    assert res.counts["requests_in"] == res.counts["requests_scored"]
    assert len(bodies) == len(set(bodies))  # calls at the server = distinct requests, although many repeat
    per_item = pq.read_table(tmp_path / "run" / "tables" / "per_item.parquet").to_pandas()
    factual = per_item[per_item.protocol == "factual"]
    assert (factual["dropped"] == 1).all()  # "kazoo" is outside the vocabulary: dropped, and counted
    report = (tmp_path / "run" / "report.md").read_text()
    assert f"Out-of-vocabulary labels dropped by the label extractor (never scored): {len(factual)}" in report
    log = [json.loads(line) for p in (tmp_path / "run" / "llm-log").glob("*.jsonl") for line in open(p)]
    print(f"\n{len(per_item)} requests judged; server calls {len(bodies)} = distinct requests; "
          f"{sum(bool(e.get('shared')) for e in log)} shared an identical request in flight, "
          f"{sum(bool(e.get('cached')) for e in log)} answered from the cache")


def _wav(path: Path, seconds: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    sf.write(buf, rng.uniform(-0.5, 0.5, int(16_000 * seconds)).astype(np.float32), 16_000, format="WAV")
    path.write_bytes(buf.getvalue())


def test_audio_refused_by_an_echoing_500_leaves_a_small_bounded_error_table(tmp_path, local_ray) -> None:
    items = []
    for i in range(30):
        _wav(tmp_path / f"clip{i}.wav", 2.0, i)
        items.append({"item_id": f"c{i}", "protocol": "factual", "question": "Which instruments play?",
                      "labels": ["piano"], "audio_uri": str(tmp_path / f"clip{i}.wav")})
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(i) for i in items))
    with LLMServer(llama_refusals=True) as srv:
        cfg = parse_config({**_config(tmp_path / "run", [{"name": "factual", "conditions": ["correct"]}]),
                            "datasets": [{"name": "mine", "kind": "items_file",
                                          "params": {"path": str(tmp_path / "items.jsonl")}}],
                            "models": [{"name": "remote", "kind": "openai_audio_chat",
                                        "params": {"base_url": srv.base_url, "model": "audio", "rpm": 60_000,
                                                   "tpm": 100_000_000, "api_key_env": TEST_API_KEY_ENV,
                                                   "max_retries": 5},
                                        "resources": {"num_cpus": 0.5, "batch_size": 8}}]})
        with pytest.raises(NothingScored) as e:
            run(cfg)
        calls = srv.chat_calls()
        echoed = sum(len(r.body) for r in srv.requests)
    assert "nothing could be scored (30 of 30 requests errored)" in str(e.value)
    assert calls == 60  # the refusal and one more try per request (not six)
    errors_file = tmp_path / "run" / "tables" / "errors.parquet"
    errors = pq.read_table(errors_file).to_pandas()
    assert len(errors) == 30 and set(errors["error_class"]) == {"input"}
    assert errors["error"].str.len().max() <= MAX_REASON_CHARS and not errors["error"].str.contains("\n").any()
    shards = [pq.read_table(p).to_pandas() for p in (tmp_path / "run" / "responses").glob("*.parquet")]
    assert max(s["error"].str.len().max() for s in shards) <= MAX_REASON_CHARS
    size = errors_file.stat().st_size
    log = sum(p.stat().st_size for p in (tmp_path / "run" / "llm-log").glob("*.jsonl"))
    assert size < 100_000
    print(f"\n30 audio requests refused (server echoed {echoed / 1e6:.1f} MB): errors.parquet {size / 1e3:.1f} KB, "
          f"request log {log / 1e3:.1f} KB, {calls} server calls")
