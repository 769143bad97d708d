"""One run whose model answers with the corpus of bad answers (tests/bad_answers.py), through the real pipeline
(local Ray): every CMI-Bench rule family with a fixture (tests/fixtures/cmi_bench) and the multiple-choice, factual
and free-form protocols with their offline judges, answered by an OpenAI-compatible endpoint (tests/llm_server.py)
that replays a bad answer per prompt — a lone surrogate, a million timestamps, a parser-breaking melody, a 400-digit
lyric. The run finishes (no exception: exit 0, or 4 where the error budget says so), rows in = scored + errored,
items.html is written, and ``--resume`` sends nothing and adds nothing."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from bad_answers import NAMED, corpus
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

install_test_key()  # at import, before any Ray worker starts, so workers inherit it

CMI = Path(__file__).parent / "fixtures" / "cmi_bench"
#: the CMI-Bench tasks with fixture files, one or more per released rule (the captioning task left out)
TASKS = ("GTZAN", "GS_key", "gtzan_beat", "DSing", "MedleyDB", "Guzheng_Tech", "EMO_arousal", "MTG_genre")
#: what the endpoint answers from: every family's named bad answers and a few generated ones of each kind
POOL = [a for answers in NAMED.values() for a in answers] + [
    a for fam in ("mcq", "factual", "freeform", "cmi_melody", "cmi_beat") for a in corpus(fam, 6, seed=5)]


def bad_answer(messages: list[dict]) -> str:
    """The replay: a bad answer chosen by the prompt (the same prompt, the same answer)."""
    user = messages[-1]["content"]
    text = user if isinstance(user, str) else next(p["text"] for p in user if p["type"] == "text")
    return POOL[zlib.crc32(text.encode("utf-8", "replace")) % len(POOL)]


@pytest.mark.slow
def test_a_run_answered_with_bad_answers_finishes_and_resumes_to_nothing(tmp_path, local_ray) -> None:
    from evalcore.runconfig.config import parse_config
    from evalcore.pipeline.outcome import RunUnscored
    from evalcore.pipeline.run import run

    wav = tmp_path / "tone.wav"
    sf.write(str(wav), (0.3 * np.sin(2 * np.pi * 440 * np.arange(16_000) / 16_000)).astype(np.float32), 16_000)
    items = []
    for i in range(4):
        items += [{"item_id": f"m{i}", "protocol": "mcq", "question": f"Which instrument plays? ({i})",
                   "options": ["guitar", "piano", "drums", "violin"], "correct_option": i % 4, "audio_uri": str(wav)},
                  {"item_id": f"f{i}", "protocol": "factual", "question": f"Which instruments do you hear? ({i})",
                   "labels": ["piano"], "audio_uri": str(wav)},
                  {"item_id": f"c{i}", "protocol": "freeform", "question": f"Describe the music. ({i})",
                   "reference": "a calm piano tone", "audio_uri": str(wav)}]
    items.append({"item_id": "no-question", "protocol": "mcq", "options": ["a", "b"], "correct_option": 0,
                  "audio_uri": str(wav)})  # a load error row
    (tmp_path / "items.jsonl").write_text("\n".join(json.dumps(r) for r in items))
    cmi = [f"cmi-{t.lower()}" for t in TASKS]
    with LLMServer(answer=bad_answer) as srv:
        cfg = parse_config({
            "name": "bad-answers",
            "datasets": [{"name": "items", "kind": "items_file", "params": {"path": str(tmp_path / "items.jsonl")}},
                         *({"name": n, "kind": "cmi_bench", "params": {"root": str(CMI), "tasks": [t]}}
                           for n, t in zip(cmi, TASKS))],
            "models": [{"name": "replay", "kind": "openai_audio_chat",
                        "params": {"base_url": srv.base_url, "model": "bad", "rpm": 100_000, "tpm": 10**9,
                                   "api_key_env": TEST_API_KEY_ENV, "budget": "bad-answers",
                                   "cache_root": str(tmp_path / "cache")},
                        "resources": {"num_cpus": 0.25, "concurrency": 1, "batch_size": 16}}],
            "protocols": [{"name": "mcq", "datasets": ["items"], "conditions": ["correct"],
                           "judge": {"kind": "mcq_string"}},
                          {"name": "factual", "datasets": ["items"], "conditions": ["correct"],
                           "judge": {"kind": "lexicon", "params": {"vocabulary": "instrument"}}},
                          {"name": "freeform", "datasets": ["items"], "conditions": ["correct"]},
                          {"name": "cmi", "kind": "mir", "datasets": cmi, "conditions": ["correct"]}],
            "storage": {"root": str(tmp_path / "run")}, "stats": {"bootstrap_resamples": 100},
            "ray": {"progress_bars": False, "decode_num_cpus": 0.25},
        })
        try:
            result = run(cfg)
        except RunUnscored as e:  # exit 4: finished, tables and report written
            result = e.result
        sent = len(srv.requests)
        root = Path(cfg.root)
        counts = json.loads((root / "run.json").read_text())["counts"]
        assert counts["requests_in"] == counts["requests_scored"] + counts["requests_errored"]
        assert counts["items_errored"] >= 1 and counts["requests_scored"] > 0
        per_item = pq.read_table(root / "tables" / "per_item.parquet").to_pandas()
        errors = pq.read_table(root / "tables" / "errors.parquet").to_pandas()
        req_errors = errors[errors["table"] == "requests"]
        assert len(per_item) + len(req_errors) == counts["requests_in"]
        assert set(req_errors["error_class"]) <= {"output", "input", "judge"}, req_errors["error_class"].value_counts()
        assert (req_errors["error_class"] == "output").any()  # the answers no rule can read
        assert (per_item.get("truncated", 0) > 0).any()  # the answers over their family's cap, cut and scored
        assert (root / "items.html").exists()
        assert result.counts["requests_in"] == counts["requests_in"]

        try:
            again = run(cfg, resume=True)
        except RunUnscored as e:
            again = e.result
        assert len(srv.requests) == sent  # nothing sent again: every answer was committed
        assert again.attempt["requests_sent"] == 0
        assert again.counts == result.counts
