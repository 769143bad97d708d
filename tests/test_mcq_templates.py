"""Multiple-choice prompt template sets, in-context examples and their config, through expand_requests."""

from __future__ import annotations

import json
import re

import pytest

from evalcore.runconfig import preflight
from evalcore.runconfig.config import ConfigError, parse_config
from evalcore.datasets.muchomusic import MuChoMusic
from evalcore.protocols import expand_requests
from evalcore.protocols.icl import IclPools, draw_examples
from evalcore.protocols.prompts import render
from evalcore.protocols.templates import MODEL_FAMILIES, TEMPLATE_SETS, letters_or, set_for_model, template_set

OPTS = ["Piano", "Violin", "Trumpet", "Guitar"]


def _items(n: int = 6, dataset: str = "d") -> list[dict]:
    return [{"dataset": dataset, "item_id": f"q{i}", "protocol": "mcq", "audio_uri": f"/a/{i}.wav",
             "question": f"Which instrument plays in clip {i}?", "options": [f"o{i}-{j}" for j in range(4)],
             "correct_option": i % 4} for i in range(n)]


def _cfg(**proto) -> object:
    return parse_config({
        "name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "unused.jsonl"}}],
        "models": [{"name": "m1", "kind": "null"}, {"name": "m2", "kind": "null"}],
        "protocols": [{"name": "mcq", "conditions": ["correct", "noise"], "option_orders": 2, **proto}],
        "seeds": {"icl": 3},
    })


# ---------------------------------------------------------------- template sets


# the released MuChoMusic prompt and the HumMusQA appendix templates: tests/test_released_prompts.py


def test_letter_list_follows_the_number_of_options() -> None:
    assert [letters_or(n) for n in (2, 3, 4)] == ["A or B", "A, B, or C", "A, B, C, or D"]
    three = TEMPLATE_SETS["hummusqa-gemini"].render("Which?", OPTS[:3])
    assert three.endswith("Return ONLY the single letter: A, B, or C") and "D:" not in three


def test_model_families_and_unknown_names() -> None:
    assert template_set("qwen2.5-omni-7b").name == "hummusqa-qwen-omni"
    assert template_set("gemini-2.5-flash").name == "hummusqa-gemini"
    assert all(v in TEMPLATE_SETS for v in MODEL_FAMILIES.values())
    with pytest.raises(ValueError, match="unknown template set 'nope'"):
        template_set("nope")
    assert set_for_model({"m1": "muchomusic"}, "m2") is None
    assert set_for_model({"m1": "muchomusic", "default": "hummusqa-plain"}, "m2").name == "hummusqa-plain"


# ---------------------------------------------------------------- in-context examples


def test_examples_exclude_the_item_and_are_seeded() -> None:
    items = _items(8)
    pools = IclPools(items)
    for it in items:
        ex = pools.examples(it, 5, seed=0)
        assert len(ex) == 5 and it["item_id"] not in {e.item_id for e in ex}
        assert len({e.item_id for e in ex}) == 5  # without replacement
        for e in ex:
            src = next(s for s in items if s["item_id"] == e.item_id)
            assert sorted(e.options) == sorted(src["options"])
            assert e.options[e.correct_index] == src["options"][src["correct_option"]]
    again = IclPools(list(reversed(items)))  # the read order does not matter
    assert pools.examples(items[0], 3, 0) == again.examples(items[0], 3, 0)
    draws = {tuple(e.item_id for e in pools.examples(items[0], 3, s)) for s in range(10)}
    assert len(draws) > 1  # the seed changes the draw
    # the examples' answers are not always at A
    letters = {e.correct_index for it in items for e in pools.examples(it, 5, 0)}
    assert len(letters) > 1


def test_duplicates_are_not_examples_and_small_pools_fail() -> None:
    items = _items(3)
    items.append({**items[0], "item_id": "copy"})  # same question and options as q0
    pools = IclPools(items)
    assert {p["item_id"] for p in pools.pool(items[0])} == {"q1", "q2"}
    assert draw_examples(items[0], pools.pool(items[0]), 0, 0) == []
    with pytest.raises(ValueError, match="only 2 other"):
        pools.examples(items[0], 3, 0)
    with pytest.raises(ValueError, match="contains the item itself"):
        draw_examples(items[0], items, 1, 0)
    with pytest.raises(ValueError, match="between 0 and 5"):
        draw_examples(items[0], items[1:], 6, 0)


def test_icl_prompt_has_answered_examples_then_the_question() -> None:
    cfg = _cfg(icl_examples=2)
    items = _items(6)
    reqs = expand_requests(cfg, items)
    assert len(reqs) == 6 * 2 * 2 * 2 and all(r["error"] is None for r in reqs)
    r = next(r for r in reqs if r["item_id"] == "q0" and r["option_order"] == 1)
    blocks = r["prompt"].split("\n\n")
    assert len(blocks) == 3
    for b in blocks[:2]:
        m = re.search(r"The correct answer is: \(([A-D])\) (o\d-\d)$", b)
        assert m, b
        q = int(m.group(2)[1])
        assert q != 0 and f"clip {q}?" in b
        src = items[q]
        assert m.group(2) == src["options"][src["correct_option"]]  # the example's own answer
        assert f"({m.group(1)}) {m.group(2)}\nThe correct answer is:" in b  # letter matches its presented option
    assert blocks[2].startswith("Question: Which instrument plays in clip 0?") and blocks[2].endswith("is:")
    # the same examples for every model, condition and order of an item
    heads = {"\n\n".join(x["prompt"].split("\n\n")[:2]) for x in reqs if x["item_id"] == "q0"}
    assert len(heads) == 1


def test_icl_with_too_few_items_makes_error_rows() -> None:
    reqs = expand_requests(_cfg(icl_examples=5), _items(4))
    assert reqs and all(r["error_stage"] == "expand" and "only 3 other" in r["error"] for r in reqs)


def test_templates_per_model_become_the_variant() -> None:
    reqs = expand_requests(_cfg(templates={"m1": "gemini-2.5-flash", "default": "muchomusic"}), _items(3))
    by_model = {m: {r["variant"] for r in reqs if r["model"] == m} for m in ("m1", "m2")}
    assert by_model == {"m1": {"hummusqa-gemini"}, "m2": {"muchomusic"}}
    m1 = next(r for r in reqs if r["model"] == "m1")
    assert m1["prompt"].startswith("**Task:**") and "A: " in m1["prompt"]
    # options and correct index are the same across template sets
    pairs = {(r["item_id"], r["option_order"], tuple(r["options"]), r["correct_index"]) for r in reqs}
    assert len(pairs) == 3 * 2


def test_template_config_errors() -> None:
    for templates in ("nope", {"m1": "nope", "default": "muchomusic"}):  # the preflight checks the set names
        with pytest.raises(ConfigError, match=r"\n  protocols\.0\.templates: unknown template set 'nope'"):
            preflight.check(_cfg(templates=templates), check_paths=False)
    with pytest.raises(ConfigError, match="either variants or templates"):
        _cfg(templates="muchomusic", variants={"v": "{question}"})
    with pytest.raises(ConfigError, match="unknown model"):
        _cfg(templates={"m9": "muchomusic"})
    with pytest.raises(ConfigError, match="icl_examples"):
        _cfg(icl_examples=6)
    with pytest.raises(ConfigError, match="mcq protocol only"):
        parse_config({"name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "x"}}],
                      "models": [{"name": "m", "kind": "null"}],
                      "protocols": [{"name": "factual", "icl_examples": 1}]})


def test_requests_carry_item_metadata() -> None:
    items = _items(2)
    items[0]["metadata"] = json.dumps({"genre": ["Rock"]})
    reqs = expand_requests(_cfg(), items)
    assert {r["metadata"] for r in reqs if r["item_id"] == "q0"} == {items[0]["metadata"]}


# ---------------------------------------------------------------- distractor ablation


def test_distractor_ablation_keeps_the_chosen_types(tmp_path) -> None:
    csv = tmp_path / "m.csv"
    csv.write_text("question,correct_answer,distractor_1_answer,distractor_2_answer,distractor_3_answer,dataset,"
                   "dataset_identifier,genre,music_knowledge,music_reasoning\n"
                   "What mood?,Calm,Tense,Loud drums,Polka,sdd,1,['Ambient'],['Mood'],[]\n")
    for subset in (["IR"], ["CU", "IU"], ["IR", "CU", "IU"]):
        (item,) = MuChoMusic(str(csv), str(tmp_path), distractors=subset).items(None)  # type: ignore[arg-type]
        meta = json.loads(item["metadata"])
        assert meta["option_types"] == ["correct", *subset]
        texts = {"correct": "Calm", "IR": "Tense", "CU": "Loud drums", "IU": "Polka"}
        assert meta["options_by_type"] == {t: texts[t] for t in meta["option_types"]}
        assert item["options"] == [texts[t] for t in meta["option_types"]]
    with pytest.raises(ValueError):
        MuChoMusic(str(csv), str(tmp_path), distractors=["XX"])
