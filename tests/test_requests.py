"""Item validation and request expansion (conditions, variants, option orders)."""

import json

import pytest

from evalcore.runconfig.config import parse_config
from evalcore.datasets.base import BadItem
from evalcore.datasets.validate import validate_items
from evalcore.protocols import expand_requests
from evalcore.protocols.prompts import option_order


def _item(i, clip=None, **kw):
    row = {"item_id": f"q{i}", "protocol": "mcq", "audio_uri": f"/audio/clip{clip if clip is not None else i}.wav",
           "question": "Which?", "options": ["a", "b", "c", "d"], "correct_option": i % 4}
    row.update(kw)
    return row


def _cfg(conditions=("correct", "random", "silence", "noise", "text_only"), orders=3, models=("m1", "m2")):
    return parse_config({
        "name": "t",
        "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "unused.jsonl"}}],
        "models": [{"name": m, "kind": "null"} for m in models],
        "protocols": [{"name": "mcq", "conditions": list(conditions), "option_orders": orders}],
    })


@pytest.mark.parametrize("row,needle", [
    ({"protocol": "mcq"}, "missing item_id"),
    (_item(0, protocol="essay"), "protocol"),
    (_item(0, options=["only"]), "at least 2 options"),
    (_item(0, correct_option=7), "correct_option"),
    (_item(0, correct_option="1"), "correct_option"),
    (_item(0, options=["a", "a"], correct_option=0), "distinct"),
    (_item(0, question=None), "missing question"),
    (_item(0, audio_uri=None), "missing audio_uri"),
    (_item(0, audio_uri=5), "audio_uri"),
    (_item(0, excerpt_start=3.0, excerpt_end=2.0), "excerpt_end"),
    (_item(0, excerpt_start=-1.0), "excerpt_start"),
    (_item(0, excerpt_start=float("nan")), "excerpt_start"),
    (_item(0, labels=["x", 3]), "labels"),
    (_item(0, colour="red"), "unknown field"),
    ({"item_id": "f", "protocol": "factual", "audio_uri": "/a.wav", "question": "?"}, "labels"),
    ({"item_id": "f", "protocol": "freeform", "audio_uri": "/a.wav", "question": "?"}, "reference"),
    (BadItem("line 3: invalid JSON"), "invalid JSON"),  # a dataset's error row (a bare str is data: not a mapping)
    (["not", "a", "dict"], "not a mapping"),
])
def test_malformed_rows_become_error_rows(row, needle):
    good, bad = validate_items("d", [_item(1), row])
    assert len(good) == 1 and len(bad) == 1
    assert needle in bad[0]["error"] and bad[0]["error_stage"] == "load"


def test_duplicate_ids_keep_the_first():
    good, bad = validate_items("d", [_item(1), _item(1, question="again")])
    assert [g["question"] for g in good] == ["Which?"]
    assert "duplicate item_id" in bad[0]["error"]


def test_expansion_counts_and_conditions():
    items, _ = validate_items("d", [_item(i, clip=i // 2) for i in range(8)])  # 2 questions per clip
    reqs = expand_requests(_cfg(), items)
    assert len(reqs) == 8 * 2 * 5 * 3
    assert len({r["request_id"] for r in reqs}) == len(reqs)
    by = {(r["item_id"], r["model"], r["condition"], r["option_order"]): r for r in reqs}
    for i in range(8):
        rnd = by[(f"q{i}", "m1", "random", 0)]
        assert rnd["audio_uri"] != f"/audio/clip{i // 2}.wav"  # never the item's own clip
        assert by[(f"q{i}", "m2", "random", 0)]["audio_uri"] == rnd["audio_uri"]  # same pairing for every model
        # both questions of a clip hear the same random clip
        assert by[(f"q{i - i % 2}", "m1", "random", 0)]["audio_uri"] == rnd["audio_uri"]
        assert by[(f"q{i}", "m1", "text_only", 0)]["audio_uri"] is None
        assert by[(f"q{i}", "m1", "noise", 1)]["seed"] == by[(f"q{i}", "m2", "noise", 1)]["seed"]
        assert by[(f"q{i}", "m1", "silence", 0)]["audio_uri"] == f"/audio/clip{i // 2}.wav"


def test_option_orders_are_seeded_and_consistent():
    items, _ = validate_items("d", [_item(i) for i in range(6)])
    reqs = expand_requests(_cfg(conditions=("correct",), orders=4, models=("m1",)), items)
    for r in reqs:
        item = items[int(r["item_id"][1:])]
        assert r["options"][r["correct_index"]] == item["options"][item["correct_option"]]
        assert sorted(r["options"]) == sorted(item["options"])
        assert "(A) " + r["options"][0] in r["prompt"] and "(D) " + r["options"][3] in r["prompt"]
    assert option_order(4, "q1", 2, 0) == option_order(4, "q1", 2, 0)
    orders = {tuple(option_order(4, "q1", k, 0)) for k in range(12)}
    assert len(orders) > 3  # orders differ across k


def test_random_condition_with_a_single_clip_is_an_error_row():
    items, _ = validate_items("d", [_item(0, clip=0), _item(1, clip=0)])
    reqs = expand_requests(_cfg(conditions=("correct", "random"), orders=1, models=("m1",)), items)
    rnd = [r for r in reqs if r["condition"] == "random"]
    assert len(rnd) == 2 and all(r["error_stage"] == "expand" and "at least 2" in r["error"] for r in rnd)
    assert all(r["error"] is None for r in reqs if r["condition"] == "correct")


def test_items_file_jsonl_with_a_bad_line(tmp_path):
    from evalcore.datasets.base import DatasetContext
    from evalcore.datasets.items_file import ItemsFile

    p = tmp_path / "items.jsonl"
    p.write_text(json.dumps(_item(0, audio_uri="clip0.wav")) + "\n{oops\n" + json.dumps(_item(1)) + "\n")
    rows = list(ItemsFile(str(p), audio_root="/root").items(DatasetContext("d", str(tmp_path), 0)))
    good, bad = validate_items("d", rows)
    assert [g["audio_uri"] for g in good] == ["/root/clip0.wav", "/audio/clip1.wav"]
    assert len(bad) == 1 and "line 2: invalid JSON" in bad[0]["error"]


def test_pairing_and_noise_do_not_depend_on_where_audio_lives():
    def run_with(prefix):
        items, _ = validate_items("d", [_item(i, audio_uri=f"{prefix}/clip{i}.wav") for i in range(9)])
        reqs = expand_requests(_cfg(conditions=("correct", "random", "noise"), orders=1, models=("m1",)), items)
        return {(r["item_id"], r["condition"]): (r["audio_item_id"], r.get("seed")) for r in reqs}

    assert run_with("/a") == run_with("s3://bucket/other/prefix")


def test_excerpts_of_one_track_are_never_paired_together():
    rows = [_item(i, audio_uri=f"/t{i % 3}.mp3", excerpt_start=10.0 * i, excerpt_end=10.0 * i + 5) for i in range(9)]
    items, _ = validate_items("d", rows)
    reqs = expand_requests(_cfg(conditions=("correct", "random"), orders=1, models=("m1",)), items)
    own = {it["item_id"]: it["audio_uri"] for it in items}
    for r in (r for r in reqs if r["condition"] == "random"):
        assert r["audio_uri"] != own[r["item_id"]]
        partner = next(it for it in items if it["item_id"] == r["audio_item_id"])
        assert (r["excerpt_start"], r["excerpt_end"]) == (partner["excerpt_start"], partner["excerpt_end"])


def test_vocabulary_placeholder_lists_the_lexicon():
    cfg = parse_config({
        "name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "x.jsonl"}}],
        "models": [{"name": "m1", "kind": "null"}],
        "protocols": [{"name": "factual", "conditions": ["correct"], "vocabulary": ["piano", "violin"],
                       "variants": {"among": "Among {vocabulary}, which instruments play?"}}],
    })
    items, _ = validate_items("d", [{"item_id": "f", "protocol": "factual", "audio_uri": "/a.wav",
                                     "question": "?", "labels": ["piano"]}])
    (req,) = expand_requests(cfg, items)
    assert req["prompt"] == "Among piano, violin, which instruments play?"
    with pytest.raises(Exception, match="unknown vocabulary"):
        parse_config({**cfg.model_dump(), "protocols": [{"name": "factual", "vocabulary": "nope"}]})


def test_factual_and_mcq_get_a_default_judge():
    from evalcore.pipeline.run import protocol_judges

    cfg = parse_config({
        "name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "x.jsonl"}}],
        "models": [{"name": "m1", "kind": "null"}],
        "protocols": [{"name": "factual"}, {"name": "mcq", "judge": {"kind": "mcq_muchomusic"}},
                      {"name": "freeform"}],
    })
    judges = protocol_judges(cfg)
    assert judges["factual"][0] == "lexicon" and judges["mcq"][0] == "mcq_muchomusic"
    assert "freeform" not in judges


def test_protocol_models_restrict_who_is_asked():
    data = _cfg(orders=1).model_dump(mode="json")
    data["protocols"][0]["models"] = ["m2"]
    cfg = parse_config(data)
    items, _ = validate_items("d", [_item(0), _item(1)])
    reqs = expand_requests(cfg, items)
    assert {r["model"] for r in reqs} == {"m2"} and len(reqs) == 2 * 5

    data["protocols"][0]["models"] = ["m3"]
    with pytest.raises(Exception, match=r"protocols\.0\.models: unknown model 'm3'"):
        parse_config(data)


def test_slices_of_the_items_expand_to_the_same_requests():
    """Read tasks expand slices of the items with the run's Expansion: together they give exactly the requests
    of expanding all items at once (same ids and fields: random partners, noise seeds, option orders)."""
    from evalcore.protocols.requests import expansion, iter_requests

    items, _ = validate_items("d", [_item(i, clip=i // 3) for i in range(14)])
    for it in items:
        it["dataset"] = "d"
    cfg = _cfg()
    whole = expand_requests(cfg, items)
    exp = expansion(cfg, items)
    sliced = [r for a in range(0, len(items), 4) for r in iter_requests(cfg, items[a:a + 4], exp)]
    assert len(sliced) == len(whole) == 14 * 2 * 5 * 3
    key = lambda r: r["request_id"]  # noqa: E731
    assert sorted(sliced, key=key) == sorted(whole, key=key)
    only_m2 = [r for a in range(0, len(items), 5) for r in iter_requests(cfg, items[a:a + 5], exp, {"m2"})]
    assert sorted(only_m2, key=key) == sorted((r for r in whole if r["model"] == "m2"), key=key)
