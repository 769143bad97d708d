"""Audio conditions (evalcore.conditions): names and families, what the model hears of a clip under a segment, the
seeds a condition draws, how the config names a mistake, and which differences the listening verdict reads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalcore.conditions.base import CONDITIONS, condition
from evalcore.protocols import expand_requests
from evalcore.reports.verdict import is_control_contrast, listening_rows
from evalcore.runconfig.config import ConfigError, parse_config

SR = 100


def test_every_fixed_condition_and_each_family_resolves_with_what_the_curve_reads():
    got = {n: (c.kept(), c.position(), c.hears, c.control) for n in
           ("correct", "random", "silence", "noise", "text_only", "first_10", "middle_25", "last_50", "window_2s")
           for c in [condition(n)]}
    assert got == {"correct": (1.0, None, True, False), "random": (None, None, True, True),
                   "silence": (0.0, None, True, True), "noise": (None, None, True, True),
                   "text_only": (0.0, None, False, True), "first_10": (0.1, "first", True, False),
                   "middle_25": (0.25, "middle", True, False), "last_50": (0.5, "last", True, False),
                   "window_2s": (None, "window", True, False)}
    assert set(CONDITIONS.names()) >= {"correct", "random", "silence", "noise", "text_only", "first", "window"}


@pytest.mark.parametrize("name,needle", [
    ("loud", "unknown condition 'loud'"), ("first_0", "above 0 and below 100"), ("last_100", "above 0 and below 100"),
    ("middle_x", "a percentage"), ("window_2", "a length in seconds"), ("first", "unknown condition 'first'"),
])
def test_a_misspelt_or_out_of_range_condition_is_one_line(name, needle):
    with pytest.raises(ValueError, match=needle.replace("(", r"\(")) as e:
        condition(name)
    assert "\n" not in str(e.value)


def test_segments_cut_the_clip_at_their_place():
    x = np.arange(1000, dtype=np.float32)
    first, middle, last = (condition(n).audio(x, SR, None) for n in ("first_25", "middle_25", "last_25"))
    assert first.tolist() == list(range(250)) and last.tolist() == list(range(750, 1000))
    assert middle.tolist() == list(range(375, 625))
    assert len(condition("first_1").audio(x[:10], SR, None)) == 1  # a segment keeps at least one sample


def test_a_window_is_seeded_inside_the_clip_and_the_whole_clip_when_shorter():
    x = np.arange(1000, dtype=np.float32)
    w = condition("window_2s")
    a, b, c = w.audio(x, SR, 7), w.audio(x, SR, 7), w.audio(x, SR, 8)
    assert len(a) == 200 and a.tolist() == b.tolist() and a[0] + 199 == a[-1] and 0 <= a[0] <= 800
    assert a.tolist() != c.tolist() or a[0] == c[0] == 0  # another seed, another place (or the same by chance)
    assert w.audio(x[:150], SR, 7).tolist() == x[:150].tolist()


def _cfg(conditions):
    return {"name": "t", "datasets": [{"name": "d", "kind": "items_file", "params": {"path": "unused.jsonl"}}],
            "models": [{"name": m, "kind": "null"} for m in ("m1", "m2")],
            "protocols": [{"name": "mcq", "conditions": list(conditions), "option_orders": 1}]}


def test_the_config_names_the_condition_that_is_wrong():
    with pytest.raises(ConfigError) as e:
        parse_config(_cfg(["correct", "first_25", "frist_50"]))
    assert "protocols.0.conditions.2: unknown condition 'frist_50'" in str(e.value)


def test_segment_requests_play_the_item_and_a_window_is_one_draw_per_clip():
    items = [{"dataset": "d", "item_id": f"q{i}", "protocol": "mcq", "audio_uri": f"/a/clip{i % 2}.wav",
              "question": "Which?", "options": ["a", "b"], "correct_option": 0} for i in range(4)]
    reqs = expand_requests(parse_config(_cfg(["correct", "last_25", "window_3s", "noise"])), items)
    seg = [r for r in reqs if r["condition"] == "last_25"]
    assert len(seg) == 8 and all(r["audio_uri"] == f"/a/clip{int(r['item_id'][1:]) % 2}.wav" for r in seg)
    seeds = {(r["item_id"], r["model"]): r["seed"] for r in reqs if r["condition"] == "window_3s"}
    assert len({seeds[("q0", "m1")], seeds[("q2", "m2")]}) == 1  # one clip, one place, for every model and question
    assert seeds[("q0", "m1")] != seeds[("q1", "m1")]
    noise = {r["item_id"]: r["seed"] for r in reqs if r["condition"] == "noise"}
    assert noise["q0"] != seeds[("q0", "m1")]  # the window's draw is its own stream


def test_the_verdict_reads_controls_and_leaves_segments_to_the_curve():
    assert [is_control_contrast(c) for c in ("correct-random", "correct-text_only", "correct-first_25",
                                              "correct-window_2s", "random-noise", "correct-someday")] == \
        [True, True, False, False, False, False]
    rows = pd.DataFrame([{"kind": "paired_diff", "group": "all", "condition": c, "model": "m", "protocol": "mcq",
                          "protocol_kind": "mcq", "dataset": "d", "metric": "accuracy", "value": 0.2}
                         for c in ("correct-random", "correct-first_25")])
    assert listening_rows(rows)["condition"].tolist() == ["correct-random"]
