"""The item browser's rules on small frames (no run): each request's outcome by protocol kind, the evidence of not
listening, the answer as shown, the links into the page, and the dashboard's link on a flagged row only."""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalcore.reports import browser_rows as br
from evalcore.reports.browser_links import difference_href, evidence_href, items_href
from evalcore.reports.dashboard import comparisons


def _req(**cols) -> pd.DataFrame:
    n = max(len(v) for v in cols.values() if isinstance(v, list))
    base = {"protocol": "p", "dataset": "d", "item_id": "i", "model": "m", "variant": "default", "option_order": 0,
            "error": None, "text": "", "parsed_index": np.nan, "extracted": None}
    return pd.DataFrame({**{k: [v] * n for k, v in base.items()}, **cols})


def test_outcomes_by_kind() -> None:
    df = _req(protocol_kind=["mcq", "mcq", "mcq", "factual", "factual", "factual", "factual", "freeform", "mcq"],
              correct=[1, 0, 0, None, None, None, None, None, 1], answered=[1, 1, 0, None, None, None, None, None, 1],
              tp=[None, None, None, 0, 2, 1, 0, None, None], fp=[None, None, None, 0, 0, 1, 2, None, None],
              f1=[None, None, None, 0.0, 1.0, 0.5, 0.0, None, None],
              error=[None] * 8 + ["decode: missing"])
    assert br.outcomes(df).tolist() == ["right", "wrong", "unparsed", "unparsed", "right", "partial", "wrong",
                                        "scored", "error"]


def test_true_false_reads_the_majority_rule() -> None:
    df = _req(protocol_kind=["true_false"] * 3, correct_majority=[1, 0, 0], answered_majority=[1, 1, 0])
    assert br.outcomes(df).tolist() == ["right", "wrong", "unparsed"]
    assert br.scores(df).tolist() == [1, 0, 0]


def test_evidence_same_answer_or_a_control_scoring_higher() -> None:
    df = _req(protocol_kind=["mcq"] * 5, condition=["correct", "random", "silence", "noise", "text_only"],
              parsed_index=[2, 2, 1, 3, 0], correct=[0, 0, 1, 0, 0], answered=[1] * 5,
              error=[None, None, None, None, "model: timeout"])
    ev = br.evidence(br.label(df))
    assert dict(zip(ev["condition"], ev["why"])) == {"random": "same answer as with the correct audio",
                                                     "silence": "scores higher than with the correct audio"}
    # answers nothing was read from compare by their text (case and spaces aside)
    df = _req(protocol_kind=["mcq"] * 3, condition=["correct", "silence", "noise"], parsed_index=[-1, -1, -1],
              text=["I  cannot tell.", "i cannot tell.", "Maybe B?"], correct=[0] * 3, answered=[0] * 3)
    assert br.evidence(br.label(df))["condition"].tolist() == ["silence"]
    # labels compare as sets; a free-form answer by its text and its first metric
    df = _req(protocol_kind=["factual"] * 3, condition=["correct", "random", "noise"],
              extracted=[["drums", "flute"], ["flute", "drums"], ["drums"]], tp=[1, 1, 1], fp=[1, 1, 0],
              f1=[2 / 3, 2 / 3, 1.0])
    ev = br.evidence(br.label(df))
    assert dict(zip(ev["condition"], ev["why"])) == {"random": "same answer as with the correct audio",
                                                     "noise": "scores higher than with the correct audio"}
    df = _req(protocol_kind=["freeform"] * 2, condition=["correct", "random"], text=["A calm piano.", "Loud drums."],
              bleu=[0.2, 0.1], meteor=[0.1, 0.5])
    assert br.evidence(br.label(df)).empty  # BLEU is the score, not METEOR


def test_evidence_needs_the_same_model_variant_and_order() -> None:
    df = _req(protocol_kind=["mcq"] * 4, condition=["correct", "random", "correct", "random"],
              option_order=[0, 1, 1, 0], parsed_index=[2, 2, 1, 3], correct=[0] * 4, answered=[1] * 4)
    assert br.evidence(br.label(df)).empty


def test_answer_as_shown() -> None:
    assert br.answer_text(2.0, None, ["a", "b", "c"], "mcq") == "C. c"
    assert br.answer_text(-1, None, ["a", "b"], "mcq") == "no option named"
    assert br.answer_text(np.nan, ["drums", "bass"], None, "factual") == "drums, bass"
    assert br.answer_text(np.nan, [], None, "factual") == "no label named"
    assert br.answer_text(np.nan, None, None, "freeform") is None


def test_links_into_the_page() -> None:
    assert difference_href("mcq", "synth", "my model", "default", "correct-random") == (
        "items.html#p=mcq&d=synth&m=my%20model&v=default&pair=random")
    assert evidence_href("listener") == "items.html#m=listener&ev=1&sort=evidence"
    assert items_href(m="x", c=None, o="") == "items.html#m=x" and items_href() == "items.html"


def test_the_dashboard_links_flagged_rows_only() -> None:
    keys = dict(series="s", checkpoint="c2", reference="c1", reference_role="previous", model="m", dataset="d",
                variant="default", group="all", direction="higher", n=10, reference_value=0.9, value=0.5, ci_low=-0.5, ci_high=-0.3,
                ci_unit="item", clusters=10, test="paired_t", p_value=0.001, p_adjusted=0.002, correction="holm",
                min_effect=0.05, improved=False)
    reg = pd.DataFrame([{**keys, "protocol": "factual", "condition": "correct", "metric": "f1", "delta": -0.4,
                         "flagged": True},
                        {**keys, "protocol": "mcq", "condition": "correct", "metric": "accuracy", "delta": -0.01,
                         "flagged": False}])
    href = "runs/s/c2/items.html#sel=vs-c1%3A0"
    key = ("s", "c2", "c1", "m", "factual", "d", "correct", "default", "f1", "all")  # nightly.evidence.LINK_KEY
    html, md = comparisons(reg, {"s/c2"}, {key: href})
    assert html.count("<a href=") == 1 and f'<a href="{href}"' in html and "▼ flagged</a>" in html
    assert "items.html" not in md


def test_a_page_that_cannot_be_written_is_a_warning_not_a_failed_run(tmp_path, caplog) -> None:
    import yaml

    from evalcore.runconfig.config import demo_config_path, parse_config
    from evalcore.pipeline.browse import items_page

    data = yaml.safe_load(demo_config_path().read_text())
    cfg = parse_config({**data, "storage": {"root": str(tmp_path / "run")}})  # a root holding no run
    with caplog.at_level("WARNING", logger="evalcore"):
        assert items_page(cfg) is None
    assert f"items.html was not written (FileNotFoundError: {tmp_path}/run/config.yaml not found)" in caplog.text


def test_the_page_lists_items_with_an_answer_before_those_without() -> None:
    """Within a protocol instance and dataset, items with an answer under the correct audio come first, then those
    without (a clip that does not decode: answered, if at all, without audio) and those that did not load, each part
    by id: the demo's page opened on its four broken clips."""
    from evalcore.reports.browser import item_table

    req = _req(item_id=["bad1", "bad1", "clip1", "clip2", "clip2"], error=["corrupt", None, None, "x", None],
               condition=["correct", "text_only", "correct", "silence", "correct"],
               protocol_kind=["mcq"] * 5, task=[None] * 5, question=["q"] * 5)  # bad1: answered without audio only
    items = pd.DataFrame({"dataset": ["d"] * 3, "item_id": ["bad1", "clip1", "clip2"], "protocol": ["p"] * 3})
    loaded = [{"protocol": "p", "dataset": "d", "item_id": "a0", "error_stage": "load", "error": "no question"}]
    out = item_table(req, items, loaded)
    assert out["item_id"].tolist() == ["clip1", "clip2", "a0", "bad1"] and out["ordinal"].tolist() == [0, 1, 2, 3]
