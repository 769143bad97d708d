"""The paraphrase conditions: each multiple-choice question and its options reworded by an LLM (the scripted
OpenAI-compatible server of tests/llm_server.py), once per item and paraphrase, cached, stored, asked, scored, shown.

Two runs on Ray (module scope) of the same suite (the demo's synthetic benchmark, both weight-free models, two
option orders, ``correct`` and two paraphrases) into two roots sharing one LLM cache: the first makes the
paraphrases, the second finds every one in the cache and sends nothing. The scripted paraphraser words paraphrase j
as ``In other words (j): …`` and each option as ``… (wording j)``; for the tempo question's second paraphrase it gives
one option too few, so those requests are error rows saying why.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from evalcore.core import storage
from llm_server import TEST_API_KEY_ENV, LLMServer, install_test_key

install_test_key()  # at import, before the session's Ray starts: its workers inherit the key
pytestmark = pytest.mark.ray

SYNTH = {"n_clips": 4, "seconds": 2.0, "seed": 6, "bad_clips": 0}


def paraphraser(messages: list[dict]) -> str:
    text = messages[-1]["content"]
    j = int(re.search(r"paraphrase number (\d+)", text).group(1))
    question = re.search(r"^Question: (.*)$", text, re.MULTILINE).group(1)
    options = re.findall(r"^\d+\. (.*)$", text, re.MULTILINE)
    if "tempo" in question and j == 2:
        options = options[:-1]  # one too few: the paraphrase is refused, its requests are error rows
    return json.dumps({"question": f"In other words ({j}): {question}",
                       "options": [f"{o} (wording {j})" for o in options]})


def _config(root, srv, cache) -> dict:
    return {"name": "paraphrase", "datasets": [{"name": "synth", "kind": "synthetic", "params": SYNTH}],
            "models": [{"name": "listener", "kind": "dsp_listener", "resources": {"num_cpus": 0.5, "batch_size": 16}},
                       {"name": "text-prior", "kind": "text_prior", "resources": {"num_cpus": 0.25}}],
            "protocols": [{"name": "mcq", "conditions": ["correct", "paraphrase_1", "paraphrase_2"],
                           "option_orders": 2}],
            "paraphraser": {"params": {"base_url": srv.base_url, "model": "scripted", "rpm": 60_000,
                                       "tpm": 100_000_000, "api_key_env": TEST_API_KEY_ENV, "cache_root": cache,
                                       "max_retries": 0, "seed": 3}},
            "storage": {"root": root}, "stats": {"bootstrap_resamples": 200},
            "ray": {"progress_bars": False, "decode_num_cpus": 0.5}}


@pytest.fixture(scope="module")
def paraphrase_runs(tmp_path_factory, local_ray):
    from evalcore.pipeline.run import run
    from evalcore.runconfig.config import parse_config

    tmp = tmp_path_factory.mktemp("paraphrase")
    with LLMServer(answer=paraphraser) as srv:
        first = run(parse_config(_config(str(tmp / "one"), srv, str(tmp / "cache"))))
        sent_first = srv.chat_requests() if hasattr(srv, "chat_requests") else None
        bodies = [json.loads(r.body) for r in srv.requests if "chat/completions" in r.path]
        second = run(parse_config(_config(str(tmp / "two"), srv, str(tmp / "cache"))))
        after = [r for r in srv.requests if "chat/completions" in r.path]
    return first, second, bodies, len(after), sent_first


def _table(root: str, *parts: str) -> pd.DataFrame:
    return storage.read_parquet(storage.join(root, *parts)).to_pandas()


def test_paraphrases_are_made_once_per_item_and_paraphrase_and_a_second_run_makes_no_call(paraphrase_runs):
    first, second, bodies, calls_after_both, _ = paraphrase_runs
    made = _table(first.root, "paraphrases", "part-00000.parquet")
    assert len(made) == 4 * 3 * 2 and set(made["paraphrase"]) == {1, 2}  # clips × mcq questions × paraphrases
    failed = made[made["error"].notna()]
    assert set(failed["item_id"].str.split("-").str[-1]) == {"tempo"} and set(failed["paraphrase"]) == {2}
    assert failed["error"].str.contains("gave 3 options for 4").all()
    distinct = {(b["messages"][-1]["content"]) for b in bodies}
    assert len(bodies) == len(distinct)  # each distinct request sent once (the tonality question is one for all)
    assert calls_after_both == len(bodies)  # the second run found every paraphrase in the cache
    again = _table(second.root, "paraphrases", "part-00000.parquet")
    pd.testing.assert_frame_equal(made.drop(columns=[]), again)


def test_each_paraphrase_request_asks_the_reworded_question_and_options(paraphrase_runs):
    first = paraphrase_runs[0]
    resp = _table(first.root, "responses")
    errors = _table(first.root, "tables", "errors.parquet")
    for j in (1, 2):
        asked = resp[(resp["condition"] == f"paraphrase_{j}") & resp["error"].isna()]
        assert asked["prompt"].str.contains(f"In other words \\({j}\\): ").all()
        assert asked["options"].map(lambda o: all(x.endswith(f"(wording {j})") for x in o)).all()
    tempo2 = errors[(errors["table"] == "requests")]
    assert len(tempo2) == 4 * 2 * 2 and tempo2["error"].str.startswith("paraphrase 2: paraphraser: gave").all()
    assert set(tempo2["error_stage"]) == {"expand"}
    assert first.counts["requests_in"] == first.counts["requests_scored"] + first.counts["requests_errored"]


def test_accuracy_per_paraphrase_and_consistency_across_paraphrases_and_orders(paraphrase_runs):
    first = paraphrase_runs[0]
    summary = _table(first.root, "tables", "summary.parquet")
    per_item = _table(first.root, "tables", "per_item.parquet")
    acc = summary[(summary["metric"] == "accuracy") & (summary["group"] == "all") & (summary["kind"] == "value")]
    assert {"correct", "paraphrase_1", "paraphrase_2"} <= set(acc["condition"])
    assert {"correct-paraphrase_1", "correct-paraphrase_2"} <= set(summary["condition"])
    cons = summary[summary["metric"] == "paraphrase_consistency"].set_index("model")
    assert set(cons.index) == {"listener", "text-prior"} and (cons["condition"] == "correct+paraphrases").all()
    for model in ("listener", "text-prior"):  # by hand: the same option (mapped back) in every order and wording
        rows = per_item[(per_item["model"] == model) & ~per_item["item_id"].str.endswith("tempo")]

        def written(r) -> str | None:
            if r.parsed_index is None or r.parsed_index < 0:
                return None
            text = r.options[int(r.parsed_index)]
            return json.loads(r.metadata).get("paraphrase_of", {}).get(text, text)

        chosen = rows.assign(w=[written(r) for r in rows.itertuples()]).groupby("item_id")["w"]
        by_hand = chosen.agg(lambda s: float(s.notna().all() and s.nunique() == 1)).mean()
        assert cons.loc[model, "value"] == pytest.approx(by_hand) and cons.loc[model, "n"] == 8


def test_the_item_browser_shows_the_paraphrases_and_the_profile_reads_the_consistency(paraphrase_runs):
    first = paraphrase_runs[0]
    shards = "".join(open(p, encoding="utf-8").read() for p in
                     sorted(__import__("glob").glob(f"{first.root}/browser/**/*.js", recursive=True)))
    assert "In other words (1): What is the tempo of this piece?" in shards and '"pp":' in shards
    report = open(f"{first.root}/report.md", encoding="utf-8").read()
    profile = report.split("## Listening profile")[1].split("\n## ")[0]
    assert "mcq · synth: consistency " in profile


def test_items_html_shows_each_items_paraphrases_in_chromium(paraphrase_runs, tmp_path):
    from cdp import Chromium

    first = paraphrase_runs[0]
    with Chromium(tmp_path / "profile", 1280, 900) as chromium:
        page = chromium.page(f"file://{first.root}/items.html")
        page.wait("document.body.dataset.state !== undefined")
        shown = page.eval("[...document.querySelectorAll('article.item details.paras')].map(d => d.textContent)")
        assert shown and all("2 paraphrases" in t and "paraphrase_1: In other words (1): " in t for t in shown)
        tempo = [t for t in shown if "tempo" in t]
        assert tempo and all("paraphrase_2: paraphraser: gave 3 options for 4" in t for t in tempo)
