"""Items reach protocol instances by one rule (:func:`evalcore.protocols.requests.reads`): an item's ``protocol``
field is a kind, and a configured instance may be named anything. The requests are expanded and a protocol left
without items is found by that same rule, so an instance whose name is not its kind is neither warned about as
empty nor failed under an error budget."""

from __future__ import annotations

from evalcore.runconfig.config import parse_config
from evalcore.pipeline.outcome import protocols_without_items
from evalcore.protocols.requests import expand_requests, reads


def _cfg(protocols: list[dict]) -> object:
    return parse_config({"name": "p", "datasets": [{"name": "a", "kind": "synthetic"}, {"name": "b", "kind": "synthetic"}],
                         "models": [{"name": "m", "kind": "text_prior"}], "protocols": protocols})


ITEMS = [{"dataset": "a", "item_id": f"q{i}", "protocol": "mcq", "audio_uri": f"/x/{i}.wav", "question": "Fast?",
          "options": ["slow", "fast"], "correct_option": 0, "task": None} for i in range(3)]


def test_an_instance_named_apart_from_its_kind_has_its_items() -> None:
    """Finding 2: ``{name: p, kind: mcq}`` got "configured but has no valid item" while its requests ran."""
    cfg = _cfg([{"name": "p", "kind": "mcq", "conditions": ["correct"]}])
    assert all(reads(cfg.protocols[0], it) for it in ITEMS)
    assert protocols_without_items(cfg, ITEMS) == []
    assert {r["protocol"] for r in expand_requests(cfg, ITEMS)} == {"p"}  # the requests carry the instance's name


def test_one_rule_for_requests_and_the_empty_check() -> None:
    cfg = _cfg([{"name": "mcq-a", "kind": "mcq", "datasets": ["a"], "conditions": ["correct"]},
                {"name": "mcq-b", "kind": "mcq", "datasets": ["b"], "conditions": ["correct"]},
                {"name": "factual", "conditions": ["correct"]}])
    reqs = expand_requests(cfg, ITEMS)
    asked = {p.name for p in cfg.protocols if any(reads(p, it) for it in ITEMS)}
    assert {r["protocol"] for r in reqs} == asked == {"mcq-a"}
    assert protocols_without_items(cfg, ITEMS) == [
        "protocol 'mcq-b' is configured but has no valid item in dataset(s) b",
        "protocol 'factual' is configured but has no valid item"]
