"""MuChoMusic's in-context figure as the released code builds it.

The released ``prepare_prompts.py`` (github.com/mulab-mir/muchomusic, commit d3c9a423d006c545b86472c0c1cfacce7058cfc5)
draws nothing: ``prepare_questions`` hands the config's one ``in_context_examples`` list to ``get_prompts``,
which puts ``" ".join(in_context_examples)`` before every question, and the released config
(``muchomusic_eval/configs/default.yaml``) holds one example. So the figure's 1-shot point is the main table's
prompt, and every question of a k-shot setting sees the same examples in the same order. The expected 0- and
1-shot strings are those the released ``get_prompts`` produced (tests/test_released_prompts.py).
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from evalcore.runconfig.config import parse_config
from evalcore.protocols import expand_requests
from evalcore.protocols.icl import Example, IclPools
from evalcore.protocols.templates import TEMPLATE_SETS
from test_released_prompts import RELEASED_EXAMPLE_STRING, RELEASED_ONE_SHOT, RELEASED_ZERO_SHOT

REPO = pathlib.Path(__file__).resolve().parents[1]
ICL_CONFIG = REPO / "configs" / "paper" / "muchomusic-icl.yaml"
MUCHO = TEMPLATE_SETS["muchomusic"]

QUESTIONS = ["What is the mood of the piece?", "Which instrument leads the melody?"]
ANSWERS = [["Melancholic", "Joyful", "It features a piano", "The Eiffel Tower"],
           ["Violin", "Flute", "The tempo is slow", "Bananas"]]


def _items(n: int) -> list[dict]:
    """The two questions of the released-prompt test first (in their given order), then ``n - 2`` more."""
    qs = QUESTIONS + [f"Question number {i}?" for i in range(2, n)]
    ans = ANSWERS + [[f"right {i}", f"wrong {i}", f"off {i}", f"far {i}"] for i in range(2, n)]
    return [{"dataset": "muchomusic", "item_id": f"q{i:02d}", "protocol": "mcq", "audio_uri": f"/a/{i}.wav",
             "question": q, "options": a, "correct_option": 0} for i, (q, a) in enumerate(zip(qs, ans))]


def _requests(items: list[dict]) -> list[dict]:
    cfg = yaml.safe_load(ICL_CONFIG.read_text())
    cfg["models"] = cfg["models"][:1]
    cfg["protocols"][0]["option_orders"] = 1
    return [r for r in expand_requests(parse_config(cfg), items) if r["error"] is None]


def _examples_of(prompt: str) -> list[str]:
    """The example blocks before the question (the released join: examples separated by a space)."""
    head = prompt.rsplit("\n Question: ", 1)[0]
    return [] if head == prompt else [e if e.startswith("Question: ") else "Question: " + e
                                      for e in head.split(" Question: ")]


def test_the_icl_config_uses_the_released_rule() -> None:
    protocol = yaml.safe_load(ICL_CONFIG.read_text())["protocols"][0]
    assert protocol["icl_pool"] == "released" and protocol["templates"] == "muchomusic"
    assert protocol["icl_examples"] == [0, 1, 2, 3, 4, 5]


def test_zero_and_one_shot_are_the_released_strings_for_every_question() -> None:
    reqs = _requests(_items(2))
    by = {(r["item_id"], r["variant"]): r for r in reqs}
    # option order 0 of these two items, presented as the released-prompt test lists them
    for i, (zero, one) in enumerate(zip(RELEASED_ZERO_SHOT, RELEASED_ONE_SHOT)):
        r0, r1 = by[(f"q{i:02d}", "muchomusic-icl0")], by[(f"q{i:02d}", "muchomusic-icl1")]
        assert r0["prompt"] == MUCHO.render(QUESTIONS[i], r0["options"])
        assert r1["prompt"] == RELEASED_EXAMPLE_STRING + "\n " + MUCHO.render(QUESTIONS[i], r1["options"])
        if list(r0["options"]) == ANSWERS[i]:
            assert r0["prompt"] == zero and r1["prompt"] == one


def test_k_shot_is_one_fixed_list_for_every_question_the_released_example_first() -> None:
    items = _items(12)
    reqs = _requests(items)
    lists: dict[int, dict[str, list[str]]] = {k: {} for k in range(6)}
    for r in reqs:
        lists[int(r["variant"].rsplit("icl", 1)[1])][r["item_id"]] = _examples_of(r["prompt"])
    for k in range(6):
        assert set(lists[k]) == {it["item_id"] for it in items}
        for item_id, examples in lists[k].items():
            assert len(examples) == k
            assert k == 0 or examples[0] == RELEASED_EXAMPLE_STRING
            own = next(it for it in items if it["item_id"] == item_id)["question"]
            assert not any(e.startswith(f"Question: {own} \n") for e in examples)  # never the item itself
        # one list: the k-shot examples are the first k of the (k+1)-shot ones
        if k < 5:
            assert all(lists[k + 1][i][:k] == ex for i, ex in lists[k].items())
    # one list for every question: an item sees another only where it is itself on that list
    from collections import Counter

    common = list(Counter(tuple(ex) for ex in lists[5].values()).most_common(1)[0][0])
    for item_id, examples in lists[5].items():
        own = next(it for it in items if it["item_id"] == item_id)["question"]
        assert examples == common or any(e.startswith(f"Question: {own} \n") for e in common)
    assert sum(ex == common for ex in lists[5].values()) == len(items) - 4

def test_an_item_on_the_list_sees_the_next_one_instead() -> None:
    items = _items(4)
    pools = IclPools(items)
    lead = Example("released", "Lead?", ("a", "b"), 0)
    full = [e.item_id for e in pools._fixed_order("muchomusic", 0)]
    first = next(it for it in items if it["item_id"] == full[0])
    assert [e.item_id for e in pools.fixed(first, 3, 0, lead)] == ["released", full[1], full[2]]
    other = next(it for it in items if it["item_id"] == full[-1])
    assert [e.item_id for e in pools.fixed(other, 3, 0, lead)] == ["released", full[0], full[1]]
    assert pools.fixed(other, 0, 0, lead) == [] and pools.fixed(other, 1, 0, lead) == [lead]
    with pytest.raises(ValueError, match="has only 3 other"):
        pools.fixed(first, 5, 0, lead)
