"""evalcore's CMI-Bench rules held to the released scorer's own values on the released outputs of Qwen2-Audio and
SALMONN.

How the values below were computed (once, outside the repository): the released ``evaluate.py`` of
github.com/nicolaus625/CMI-bench at commit 4c15f410bf0c7ff59d654b2a96f3295f3dec5aa5, unmodified, was imported and its
functions called on ``model/results/qwen2/qwen2_<task>.jsonl`` and ``model/results/salmonn/salmonn_<task>.jsonl``
of the same commit: ``get_multiclass_acc`` (GTZAN, VocalSet_tech, Nsynth_instrument, Nsynth_pitch),
``key_ensamble_score`` (GS_key), ``beat_tracking`` (gtzan/ballroom beat and downbeat; its printed lines captured and
its three ``np.mean`` results read by wrapping the module's ``np``), ``batch_wer_cer`` (DSing),
``calculate_frame_f1`` (Guzheng_Tech; it returns micro, macro) and ``cal_r2`` (EMO arousal and valence; once as
released — its annotations a float32 tensor, torch's default dtype, and torchmetrics' sums float32 — and once more
with ``torch.set_default_dtype(torch.float64)``), with
mir_eval 0.8.2, jiwer 4.0.0, num2words 0.5.14, torch 2.13.0, torchmetrics 1.9.0 and scikit-learn 1.9.1. The files
are too large to keep whole, so ``tests/fixtures/cmi_bench/results`` holds a deterministic subset of each — every
``STEP[task]``-th row, first row included, written back as a JSON list — and :data:`PUBLISHED` are the released
functions' values **on those subsets** (``FULL``: on the whole files, checked when ``EVALCORE_CMI_RESULTS`` points at
a checkout's ``model/results``). MedleyDB's outputs (over 4 MiB each) are not retrievable here: the melody rule is
held to hand-made responses scored by the released ``process_midi_sequence`` / ``melody_evaluation``
(tests/test_cmi_rules.py). The tagging tasks need text-embedding weights not available here.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from evalcore.cli.score.cmi import released_lines, score_files

RESULTS = pathlib.Path(__file__).parent / "fixtures" / "cmi_bench" / "results"
#: rows kept of each released file: every STEP-th (row 0 first)
STEP = {"GTZAN": 6, "VocalSet_tech": 20, "Nsynth_instrument": 90, "Nsynth_pitch": 90, "GS_key": 25, "gtzan_beat": 6,
        "gtzan_downbeat": 6, "ballroom_beat": 15, "ballroom_downbeat": 15, "DSing": 10, "Guzheng_Tech": 2,
        "EMO_arousal": 3, "EMO_valence": 3}

PUBLISHED = {
    "qwen2_GTZAN": {"accuracy": 0.673469387755102},
    "qwen2_VocalSet_tech": {"accuracy": 0.14035087719298245},
    "qwen2_Nsynth_instrument": {"accuracy": 0.41304347826086957},
    "qwen2_Nsynth_pitch": {"accuracy": 0.0},
    "qwen2_GS_key": {"key_weighted_score": 0.09896907216494846},
    "qwen2_gtzan_beat": {"f_measure": 0.0655028489663345, "cmlt": 0.015077943406259764, "amlt": 0.038016732103132084},
    "qwen2_gtzan_downbeat": {"f_measure": 0.06181403911262055, "cmlt": 0.0, "amlt": 0.011574509816143394},
    "qwen2_ballroom_beat": {"f_measure": 0.06907177651766495, "cmlt": 0.02784177807396935, "amlt": 0.04257789142510797},
    "qwen2_ballroom_downbeat": {"f_measure": 0.074100729140878, "cmlt": 0.0, "amlt": 0.02107045628964345},
    "qwen2_DSing": {"wer": 15.99420207574967, "cer": 15.438885764604404},
    "qwen2_Guzheng_Tech": {"frame_f1_micro": 0.0006666666666666668, "frame_f1_macro": 0.00018433179723502304},
    "qwen2_EMO_arousal": {"r2": -0.43815808115519483, "r2_float64": -0.43815821050692305},
    "qwen2_EMO_valence": {"r2": -0.568544802867111, "r2_float64": -0.568544944379135},
    "salmonn_GTZAN": {"accuracy": 0.32653061224489793},
    "salmonn_VocalSet_tech": {"accuracy": 0.03508771929824561},
    "salmonn_Nsynth_instrument": {"accuracy": 0.0},
    "salmonn_Nsynth_pitch": {"accuracy": 0.021739130434782608},
    "salmonn_GS_key": {"key_weighted_score": 0.058762886597938144},
    "salmonn_gtzan_beat": {"f_measure": 0.13051353658746198, "cmlt": 0.046774476322173734, "amlt": 0.05902560697755292},
    "salmonn_gtzan_downbeat": {"f_measure": 0.08123987469553258, "cmlt": 0.0, "amlt": 0.007417433230119526},
    "salmonn_ballroom_beat": {"f_measure": 0.14989880684344897, "cmlt": 0.0571431695800851, "amlt": 0.08044366660279507},
    "salmonn_ballroom_downbeat": {"f_measure": 0.08379299337254367, "cmlt": 0.0, "amlt": 0.020201990254565448},
    "salmonn_DSing": {"wer": 10.412941069535314, "cer": 10.708859804309803},
    "salmonn_Guzheng_Tech": {"frame_f1_micro": 0.0006666666666666668, "frame_f1_macro": 0.00018433179723502304},
    # SALMONN's released arousal and valence files are one file (the same git blob upstream): equal values here
    "salmonn_EMO_arousal": {"r2": -1.573639938839586, "r2_float64": -1.5736401768598443},
    "salmonn_EMO_valence": {"r2": -1.573639938839586, "r2_float64": -1.5736401768598443},
}

#: the lines the released beat_tracking printed on the subsets ("beat as printed")
PRINTED = {
    "qwen2_gtzan_beat": ['BEAT_TRACKING F1: 6.55', 'Average CMLt: 1.51', 'Average AMLt: 3.80'],
    "qwen2_gtzan_downbeat": ['DOWNBEAT_TRACKING F1: 6.18', 'Average CMLt: 0.00', 'Average AMLt: 1.16'],
    "qwen2_ballroom_beat": ['BEAT_TRACKING F1: 6.91', 'Average CMLt: 2.78', 'Average AMLt: 4.26'],
    "qwen2_ballroom_downbeat": ['DOWNBEAT_TRACKING F1: 7.41', 'Average CMLt: 0.00', 'Average AMLt: 2.11'],
    "salmonn_gtzan_beat": ['BEAT_TRACKING F1: 13.05', 'Average CMLt: 4.68', 'Average AMLt: 5.90'],
    "salmonn_gtzan_downbeat": ['DOWNBEAT_TRACKING F1: 8.12', 'Average CMLt: 0.00', 'Average AMLt: 0.74'],
    "salmonn_ballroom_beat": ['BEAT_TRACKING F1: 14.99', 'Average CMLt: 5.71', 'Average AMLt: 8.04'],
    "salmonn_ballroom_downbeat": ['DOWNBEAT_TRACKING F1: 8.38', 'Average CMLt: 0.00', 'Average AMLt: 2.02'],
}

#: the released functions on the whole released files
FULL = {
    "qwen2_GTZAN": {"accuracy": 0.6241379310344828},
    "qwen2_VocalSet_tech": {"accuracy": 0.1482456140350877},
    "qwen2_Nsynth_instrument": {"accuracy": 0.376220703125},
    "qwen2_Nsynth_pitch": {"accuracy": 0.01513671875},
    "qwen2_GS_key": {"key_weighted_score": 0.07768079800498753},
    "qwen2_gtzan_beat": {"f_measure": 0.07504417995886646, "cmlt": 0.020426049178437933, "amlt": 0.036864041131032095},
    "qwen2_gtzan_downbeat": {"f_measure": 0.05972781144735188, "cmlt": 0.00010775862068965517, "amlt": 0.005911634128847752},
    "qwen2_ballroom_beat": {"f_measure": 0.07115886259422137, "cmlt": 0.020072023852270728, "amlt": 0.038550405901972576},
    "qwen2_ballroom_downbeat": {"f_measure": 0.05686549839047557, "cmlt": 0.00014598540145985403, "amlt": 0.012098567366358502},
    "qwen2_DSing": {"wer": 7.929860274316845, "cer": 8.185886261865923},
    "qwen2_Guzheng_Tech": {"frame_f1_micro": 0.0003435245620061834, "frame_f1_macro": 9.404683532399136e-05},
    "qwen2_EMO_arousal": {"r2": -0.484588340931545, "r2_float64": -0.484588297672355},
    "qwen2_EMO_valence": {"r2": -0.5295370490919191, "r2_float64": -0.5295370075972947},
    "salmonn_GTZAN": {"accuracy": 0.30344827586206896},
    "salmonn_VocalSet_tech": {"accuracy": 0.02631578947368421},
    "salmonn_Nsynth_instrument": {"accuracy": 0.00146484375},
    "salmonn_Nsynth_pitch": {"accuracy": 0.0},
    "salmonn_GS_key": {"key_weighted_score": 0.06342477140482128},
    "salmonn_gtzan_beat": {"f_measure": 0.11493885911999283, "cmlt": 0.041625914786493384, "amlt": 0.06161072867321249},
    "salmonn_gtzan_downbeat": {"f_measure": 0.08622331626337569, "cmlt": 0.0, "amlt": 0.005724795973752248},
    "salmonn_ballroom_beat": {"f_measure": 0.14968074930334865, "cmlt": 0.05679609886607626, "amlt": 0.07920990060674385},
    "salmonn_ballroom_downbeat": {"f_measure": 0.09401995710476196, "cmlt": 0.0, "amlt": 0.026847755213776695},
    "salmonn_DSing": {"wer": 8.160571485728818, "cer": 7.60000374747811},
    "salmonn_Guzheng_Tech": {"frame_f1_micro": 0.0003435245620061834, "frame_f1_macro": 9.404683532399136e-05},
    "salmonn_EMO_arousal": {"r2": -1.0407938486295234, "r2_float64": -1.0407937952156487},
    "salmonn_EMO_valence": {"r2": -1.0407938486295234, "r2_float64": -1.0407937952156487},
}


def _figures(summary) -> dict[tuple[str, str], dict[str, float]]:
    vals = summary[(summary["kind"] == "value") & (summary["group"] == "all") & (summary["condition"] == "correct")]
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in vals.itertuples():
        out.setdefault((r.model, r.dataset), {})[r.metric] = float(r.value)
    return out


@pytest.fixture(scope="module")
def scored():
    files = sorted(str(p) for p in RESULTS.glob("*.jsonl"))
    per_item, summary, errors, skipped = score_files(files, None, resamples=20, seed=0)
    return per_item, summary, errors, skipped, _figures(summary)


def _held(figures: dict, published: dict) -> None:
    for key, want in published.items():
        model, task = key.split("_", 1)
        got = figures[(model, task)]
        for metric, value in want.items():
            if metric == "r2_float64":
                # the same released function computing in float64: equal to 1e-9
                assert got["r2"] == pytest.approx(value, abs=1e-9), (key, metric)
            elif metric == "r2":
                # as released (annotations a float32 tensor, R2Score's sums float32): float32's precision
                assert got["r2"] == pytest.approx(value, abs=1e-6), (key, metric)
            else:
                assert got[metric] == pytest.approx(value, abs=1e-9), (key, metric)


def test_subsets_are_the_released_rows_every_step(scored) -> None:
    assert {p.stem for p in RESULTS.glob("*.jsonl")} == set(PUBLISHED)
    for key in PUBLISHED:
        model, task = key.split("_", 1)
        rows = json.loads((RESULTS / f"{key}.jsonl").read_text())
        assert rows and {"question", "response", "correct_answer", "audioid"} <= set(rows[0]), key
        assert rows[0]["audioid"].startswith("../testdata/"), key  # the released rows, not rows of our own


def test_every_rule_equals_the_released_scorer_on_both_models(scored) -> None:
    per_item, summary, errors, skipped, figures = scored
    assert skipped == [] and errors == []
    assert len(per_item) == sum(len(json.loads((RESULTS / f"{k}.jsonl").read_text())) for k in PUBLISHED)
    _held(figures, PUBLISHED)


def test_beat_as_printed(scored) -> None:
    figures = scored[4]
    for key, lines in PRINTED.items():
        model, task = key.split("_", 1)
        assert released_lines(model, task, figures[(model, task)]) == lines, key


@pytest.mark.skipif(not os.environ.get("EVALCORE_CMI_RESULTS"),
                    reason="EVALCORE_CMI_RESULTS (a CMI-bench checkout's model/results) not set")
def test_whole_released_files() -> None:
    root = pathlib.Path(os.environ["EVALCORE_CMI_RESULTS"])
    files = [str(root / k.split("_", 1)[0] / f"{k}.jsonl") for k in FULL]
    _, summary, errors, skipped = score_files(files, None, resamples=1, seed=0)
    assert skipped == [] and errors == []
    _held(_figures(summary), FULL)
