"""The caption condition: the clip replaced by a description of it in the prompt, from an item's ``caption`` field
(real MusicCaps captions) or from an earlier free-form run's answers (``captions:`` in the config).

Two runs on Ray (module scope): a describer run (the DSP listener answers "Describe this piece of music." for six
synthetic clips), then a multiple-choice run over the same synthetic clips (their descriptions: the describer's
answers) and over eight MusicCaps rows (their descriptions: MusicCaps' captions, as the items' field), asked of the
listener and of a text LLM (``text_llm``, the cascade baseline) served by the scripted OpenAI-compatible server,
which records every prompt it receives.
"""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from data_paths import missing
from evalcore.conditions.caption import TEMPLATE
from evalcore.core import storage
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

install_test_key()  # at import, before the session's Ray starts: its workers inherit the key
pytestmark = pytest.mark.ray

MUSICCAPS = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "data" / "musiccaps" / \
    "musiccaps-public.csv"
SYNTH = {"n_clips": 6, "seconds": 2.0, "seed": 4, "bad_clips": 0}


def _musiccaps_items(root) -> str:
    """Eight MusicCaps rows as multiple-choice items: which aspect fits (its own first aspect, or another row's),
    the caption as the item's ``caption``; a second of noise stands for each clip (no audio is shipped)."""
    with open(MUSICCAPS, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["caption"].strip()][:8]
    aspects = [eval(r["aspect_list"])[0] for r in rows]  # noqa: S307 - the file's own Python list literals
    (root / "audio").mkdir(parents=True)
    items = []
    for i, r in enumerate(rows):
        sf.write(root / "audio" / f"{r['ytid']}.wav", np.random.default_rng(i).normal(0, 0.1, 16_000), 16_000)
        others = [a for a in dict.fromkeys(aspects) if a != aspects[i]][:3]
        items.append({"item_id": f"mc-{r['ytid']}", "protocol": "mcq", "audio_uri": f"audio/{r['ytid']}.wav",
                      "question": "Which of these describes the music?", "options": [aspects[i], *others],
                      "correct_option": 0, "caption": r["caption"]})
    path = root / "items.jsonl"
    path.write_text("\n".join(json.dumps(it) for it in items) + "\n")
    return str(path)


def _cascade(messages: list[dict]) -> str:
    """A scripted text LLM: the option sharing the most words with the description in the prompt."""
    text = messages[-1]["content"][-1]["text"] if isinstance(messages[-1]["content"], list) else messages[-1]["content"]
    words = set(re.findall(r"[a-z]+", text.split("\n\n", 1)[0].lower()))
    options = re.findall(r"^\(([A-Z])\) (.*)$", text, re.MULTILINE)
    best = max(options, key=lambda o: len(words & set(re.findall(r"[a-z]+", o[1].lower()))), default=("A", ""))
    return f"({best[0]})"


def _run(cfg: dict):
    from evalcore.pipeline.run import run
    from evalcore.runconfig.config import parse_config

    return run(parse_config({**cfg, "ray": {"progress_bars": False, "decode_num_cpus": 0.5},
                             "stats": {"bootstrap_resamples": 200}}))


@pytest.fixture(scope="module")
def caption_runs(tmp_path_factory, local_ray):
    if not MUSICCAPS.exists():
        pytest.skip(missing(MUSICCAPS))
    root = tmp_path_factory.mktemp("captions")
    listener = {"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 16}}
    describer = _run({"name": "describe", "datasets": [{"name": "synth", "kind": "synthetic", "params": SYNTH}],
                      "models": [listener], "protocols": [{"name": "freeform", "conditions": ["correct"]}],
                      "storage": {"root": str(root / "describe")}})
    with LLMServer(answer=_cascade) as srv:
        result = _run({
            "name": "caption",
            "datasets": [{"name": "synth", "kind": "synthetic", "params": SYNTH},
                         {"name": "musiccaps", "kind": "items_file",
                          "params": {"path": _musiccaps_items(root / "musiccaps")}}],
            "models": [listener, {"name": "cascade", "kind": "text_llm", "resources": {"num_cpus": 0.25},
                                  "params": {"base_url": srv.base_url, "model": "scripted", "rpm": 60_000,
                                             "tpm": 100_000_000, "api_key_env": TEST_API_KEY_ENV,
                                             "cache_root": str(root / "cache"), "max_retries": 0}}],
            "protocols": [{"name": "mcq", "conditions": ["correct", "caption"], "option_orders": 1}],
            "captions": {"run": describer.root, "model": "listener"},
            "storage": {"root": str(root / "run")},
        })
        received = [json.loads(r.body)["messages"][-1]["content"][-1]["text"] for r in srv.requests
                    if "chat/completions" in r.path]
    return describer, result, received


def _responses(root: str) -> pd.DataFrame:
    return storage.read_parquet(storage.join(root, "responses")).to_pandas()


def test_each_caption_request_gives_the_model_its_clips_description_and_no_audio(caption_runs):
    describer, result, received = caption_runs
    described = pd.read_parquet(f"{describer.root}/tables/per_item.parquet")
    by_clip = {r.item_id.split("-")[0]: r.text for r in described.itertuples()}  # clip0003-freeform-caption
    with open(MUSICCAPS, newline="", encoding="utf-8") as f:
        musiccaps = {f"mc-{r['ytid']}": r["caption"] for r in csv.DictReader(f)}
    resp = _responses(result.root)
    caption = resp[resp["condition"] == "caption"]
    assert len(caption) == 2 * (6 * 3 + 8) and caption["error"].isna().all()
    assert caption["audio_uri"].isna().all() and (caption["audio_seconds"] == 0).all()
    correct = resp[resp["condition"] == "correct"].set_index(["item_id", "model"])["prompt"]
    for r in caption.itertuples():  # request by request: the description of its own clip, then the prompt as asked
        expected = by_clip[r.item_id.split("-")[0]] if r.dataset == "synth" else musiccaps[r.item_id]
        assert r.prompt == TEMPLATE.format(caption=expected, prompt=correct[(r.item_id, r.model)])
    # what the cascade's endpoint received is exactly those prompts (its caption requests and its text-only ones;
    # a prompt asked twice, e.g. one question of two clips under correct, is answered once, from the cache)
    cascade = resp[resp["model"] == "cascade"]
    assert set(received) == set(cascade["prompt"]) and len(received) == len(set(received))


def test_the_report_says_whether_listening_beats_the_description(caption_runs):
    _, result, _ = caption_runs
    summary = pd.read_parquet(f"{result.root}/tables/summary.parquet")
    diff = summary[(summary["kind"] == "paired_diff") & (summary["condition"] == "correct-caption")
                   & (summary["group"] == "all") & (summary["metric"] == "accuracy")]
    assert set(zip(diff["model"], diff["dataset"])) == {(m, d) for m in ("listener", "cascade")
                                                       for d in ("synth", "musiccaps")}
    report = open(f"{result.root}/report.md", encoding="utf-8").read()
    section = report.split("## Does listening beat a description?")[1].split("\n## ")[0]
    for r in diff.itertuples():
        assert f"{r.model} · {r.protocol} · {r.dataset}" in section
    assert "correct-caption" not in " ".join(result.verdicts)  # a description is no control of the verdict
    profile = report.split("## Listening profile")[1].split("\n## ")[0]
    listener = next(line for line in profile.splitlines() if line.startswith("| listener |"))
    assert "mcq · synth: the whole clip beats the description (+" in listener
