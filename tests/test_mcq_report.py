"""The run summary's multiple-choice breakdowns, chosen option types and the audio-attention table,
on a small example whose numbers are computed by hand."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from evalcore.reports import markdown
from evalcore.reports.mcq import attention_sections, breakdown_sections, chosen_sections
from evalcore.scorers.mcq_breakdowns import breakdown_groups, chosen_type
from evalcore.scoring.requests import per_item_table
from evalcore.scoring.summary import summary_table

CANON = ["calm", "tense", "loud", "polka"]  # types correct, IR, CU, IU
TYPES = ["correct", "IR", "CU", "IU"]
PERMS = [[0, 1, 2, 3], [3, 2, 1, 0]]  # order 1 presents the options reversed
GENRES = {"q1": ["Rock"], "q2": ["Rock", "Pop"], "q3": ["Pop"]}
# model → condition → question → the type chosen in orders 0 and 1 (None = unanswered)
CHOICES = {
    "m": {"correct": {"q1": ["correct", "correct"], "q2": ["correct", "IR"], "q3": ["correct", None]},
          "noise": {"q1": ["IR", "IR"], "q2": ["CU", "CU"], "q3": [None, None]}},
    "m2": {c: {q: ["correct", "correct"] for q in GENRES} for c in ("correct", "noise")},
}
# Hand computation for model m:
#   correct: order 0 ✓✓✓ = 1, order 1 ✓✗✗ = 1/3 → mean 2/3, SD (ddof 1) = (2/3)/√2 ≈ 0.4714
#            consistency: q1 only → 1/3; IFR 5/6
#   noise:   every answer wrong → accuracy 0, SD 0; consistency q1 (IR, IR) and q2 (CU, CU) → 2/3; IFR 4/6
#   paired difference correct − noise per question: q1 1, q2 1/2, q3 1/2 → 2/3, every resample > 0 → CI > 0
#   chosen types (correct audio): correct (1 + 1/2 + 1/2)/3 = 2/3, IR 1/6, CU 0, IU 0, none 1/6
#   genre=Rock (q1, q2), correct audio: order 0 = 1, order 1 = 1/2 → mean 3/4, SD 0.5/√2 ≈ 0.3536
#   genre=Pop (q2, q3): order 0 = 1, order 1 = 0 → mean 1/2, SD 1/√2 ≈ 0.7071


def merged_rows() -> list[dict]:
    rows = []
    for model, by_cond in CHOICES.items():
        for cond, by_q in by_cond.items():
            for q, picks in by_q.items():
                meta = json.dumps({"genre": GENRES[q], "options_by_type": dict(zip(TYPES, CANON))})
                for order, t in enumerate(picks):
                    perm = PERMS[order]
                    options = [CANON[i] for i in perm]
                    parsed = -1 if t is None else perm.index(TYPES.index(t))
                    rows.append({
                        "request_id": f"{model}-{cond}-{q}-{order}", "dataset": "mcm", "item_id": q,
                        "protocol": "mcq", "model": model, "condition": cond, "variant": "muchomusic",
                        "option_order": order, "task": "muchomusic", "category": "sdd", "difficulty": None,
                        "audio_item_id": q, "text": "…", "options": options, "correct_index": perm.index(0),
                        "parsed_index": parsed, "judge": "mcq_string@1", "metadata": meta, "error": None,
                    })
    return rows


@pytest.fixture(scope="module")
def summary() -> pd.DataFrame:
    per_item = per_item_table(merged_rows())
    return summary_table(per_item, resamples=400, confidence=0.95, seed=0).to_pandas()


def _v(s: pd.DataFrame, metric: str, condition: str, group: str = "all", model: str = "m", kind: str = "value"):
    r = s[(s.model == model) & (s.metric == metric) & (s.condition == condition) & (s.group == group)
          & (s.kind == kind)]
    assert len(r) == 1, (metric, condition, group, len(r))
    return r.iloc[0]


def test_hand_computed_accuracy_sd_consistency_ifr(summary: pd.DataFrame) -> None:
    expected = {("correct", "accuracy"): 2 / 3, ("correct", "accuracy_sd"): (2 / 3) / math.sqrt(2),
                ("correct", "consistency"): 1 / 3, ("correct", "ifr"): 5 / 6,
                ("noise", "accuracy"): 0.0, ("noise", "accuracy_sd"): 0.0,
                ("noise", "consistency"): 2 / 3, ("noise", "ifr"): 4 / 6}
    for (cond, metric), want in expected.items():
        assert _v(summary, metric, cond).value == pytest.approx(want), (cond, metric)
    d = _v(summary, "accuracy", "correct-noise", kind="paired_diff")
    assert d.value == pytest.approx(2 / 3) and d.ci_low >= 0.5 and d.n == 3
    d2 = _v(summary, "accuracy", "correct-noise", model="m2", kind="paired_diff")
    assert d2.value == 0 and d2.ci_low == 0 == d2.ci_high


def test_genre_breakdown(summary: pd.DataFrame) -> None:
    rock, pop = _v(summary, "accuracy", "correct", "genre=Rock"), _v(summary, "accuracy", "correct", "genre=Pop")
    assert rock.value == pytest.approx(0.75) and rock.n == 2
    assert pop.value == pytest.approx(0.5) and pop.n == 2
    assert _v(summary, "accuracy_sd", "correct", "genre=Rock").value == pytest.approx(0.5 / math.sqrt(2))
    assert _v(summary, "accuracy_sd", "correct", "genre=Pop").value == pytest.approx(1 / math.sqrt(2))
    # a single category on every row would repeat "all": no category= groups
    assert not summary["group"].str.startswith("category=").any()
    assert not summary["group"].str.startswith("difficulty=").any()


def test_chosen_option_types(summary: pd.DataFrame) -> None:
    want = {"correct": 2 / 3, "IR": 1 / 6, "CU": 0.0, "IU": 0.0, "none": 1 / 6}
    for t, v in want.items():
        assert _v(summary, "chosen_share", "correct", f"chosen={t}").value == pytest.approx(v), t
    assert _v(summary, "chosen_share", "noise", "chosen=CU").value == pytest.approx(1 / 3)
    assert chosen_type(["a", "b"], 1, "{}") is None  # no typed options: nothing to say
    assert chosen_type(["calm", "x"], 1, json.dumps({"options_by_type": {"correct": "calm"}})) == "none"


def test_breakdown_groups_skip_task_copies() -> None:
    df = pd.DataFrame({"task": ["a", "a", "b"], "category": ["a", "a", "b"], "difficulty": ["low", "high", "low"],
                       "metadata": [json.dumps({"secondary_categories": ["Harmony", "Melody"],
                                                "music_knowledge": ["Melody"], "music_reasoning": []}),
                                    "{}", json.dumps({"music_reasoning": ["Mood"]})]})
    labels = [g for g, _ in breakdown_groups(df)]
    assert labels == ["secondary_category=Harmony", "secondary_category=Melody", "difficulty=high",
                      "difficulty=low", "dimension=knowledge", "dimension=knowledge/Melody", "dimension=reasoning",
                      "dimension=reasoning/Mood"]
    sizes = {g: len(d) for g, d in breakdown_groups(df)}
    assert sizes["difficulty=low"] == 2 and sizes["secondary_category=Melody"] == 1


def test_attention_table_rows_and_cells(summary: pd.DataFrame) -> None:
    lines = attention_sections(summary, 95)
    text = "\n".join(lines)
    assert "## Audio-attention test · mcq · mcm" in text
    assert "| model | variant | correct | noise |" in text
    assert "| m | muchomusic | 66.7 ± 47.1 | 0.0 ± 0.0 |" in text
    assert "| m2 | muchomusic | 100.0 ± 0.0 | 100.0 ± 0.0 |" in text
    paired = [ln for ln in lines[-1].splitlines() if ln.startswith(("| m |", "| m2 |"))]
    assert len(paired) == 2
    # 3 questions: under the default minimum (20) no paired test decides anything, however clear its CI
    assert paired[0].startswith("| m | muchomusic | correct-noise | +66.7 [") and paired[0].endswith(
        "| 3 | 3 items | paired bootstrap | too few items (n=3 < 20) |")
    # m2 answers every question right in both orders (0/1 outcomes): McNemar's exact test, no discordant pair
    assert paired[1].endswith("| 3 | 3 items | McNemar exact, p (Holm) 1 | too few items (n=3 < 20) |")
    assert "CI" not in lines[-1].split("| m |", 1)[1]
    # with the minimum lowered to 3 the CI decides; m2's [0, 0] (identical answers) is flagged, not "CI includes 0"
    paired = [ln for ln in attention_sections(summary, 95, min_items=3)[-1].splitlines()
              if ln.startswith(("| m |", "| m2 |"))]
    assert paired[0].endswith("| 3 | 3 items | paired bootstrap | yes (CI > 0) |")
    assert paired[1].endswith("| 3 | 3 items | McNemar exact, p (Holm) 1 | degenerate [0.000, 0.000] (every resample "
                              "equal; no difference on any item) |")


def test_breakdown_and_chosen_sections(summary: pd.DataFrame) -> None:
    text = "\n".join(breakdown_sections(summary))
    assert "### mcq · mcm by genre (correct audio)" in text
    assert "| m | muchomusic | Rock | 2 | 75.0 ± 35.4 | 50.0 | 100.0 |" in text  # consistency q1 only, IFR 4/4
    assert "| m | muchomusic | Pop | 2 | 50.0 ± 70.7 | 0.0 | 75.0 |" in text
    chosen = "\n".join(chosen_sections(summary))
    assert "| model | variant | condition | questions | correct | IR | CU | IU | none |" in chosen
    assert "| m | muchomusic | correct | 3 | 66.7 | 16.7 | 0.0 | 0.0 | 16.7 |" in chosen


def test_the_report_includes_the_mcq_sections(summary: pd.DataFrame) -> None:
    counts = {"items_in": 3, "items_valid": 3, "items_errored": 0, "requests_in": 24, "requests_scored": 24,
              "requests_errored": 0}
    report = markdown.render({"name": "t", "confidence": 0.95}, counts, summary, pd.DataFrame())
    for heading in ("## Audio-attention test", "## Multiple-choice breakdowns", "## Chosen option types"):
        assert heading in report


def test_no_attention_table_without_a_second_condition(summary: pd.DataFrame) -> None:
    only_correct = summary[summary["condition"] == "correct"]
    assert attention_sections(only_correct, 95) == []
    assert attention_sections(summary.iloc[0:0], 95) == []
