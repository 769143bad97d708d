"""The nightly's parts without a run: config mistakes, discovery order and ready markers, the ledger's
errors and leases, Holm's correction and the comparison's decisions, the listener checkpoint."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.models.dsp_listener import DSPListener, analyze, read_deaf_to
from evalcore.nightly import compare
from evalcore.nightly.config import parse_nightly
from evalcore.nightly.demo import demo_config_path, write_checkpoint
from evalcore.nightly.ledger import Ledger, LedgerError
from evalcore.core.nightly_outcome import CheckpointKey, LedgerRecord, Status, Verdict
from evalcore.nightly.series import discover, natural_key


def demo_data(tmp_path) -> dict:
    data = yaml.safe_load(demo_config_path().read_text())
    data["series"][0]["prefix"] = str(tmp_path / "ck")
    data["storage"] = {"root": str(tmp_path / "root")}
    return data


def test_natural_order_puts_step_999_before_step_1000() -> None:
    names = ["step-1000", "step-999", "step-10", "step-1000b", "Step-2"]
    assert sorted(names, key=natural_key) == ["Step-2", "step-10", "step-999", "step-1000", "step-1000b"]


@pytest.mark.parametrize("patch, field", [
    ({"max_attempts": 0}, "max_attempts"),
    ({"series": [{"name": "a", "prefix": "x", "model": {"kind": "dsp_listner"}}]}, "series.0.model.kind"),
    ({"min_effect": {"default": -1}}, "min_effect.default"),
    ({"seriess": []}, "seriess"),
])
def test_a_config_mistake_exits_2_naming_the_field(tmp_path, patch, field) -> None:
    data = {**demo_data(tmp_path), **patch}
    path = tmp_path / "n.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(app, ["nightly", str(path)])
    assert res.exit_code == 2
    lines = [x.strip() for x in res.output.splitlines() if x.strip()]
    assert lines[0] == "invalid nightly config:" and lines[1].startswith(f"{field}:"), res.output


def test_the_demo_config_parses_and_series_params_are_checked_as_a_run(tmp_path) -> None:
    cfg = parse_nightly(demo_data(tmp_path))
    assert cfg.series[0].baseline == "step-1000" and cfg.min_effect.of("accuracy") == 0.05
    bad = demo_data(tmp_path)
    bad["series"][0]["model"]["params"] = {"sample_rat": 16000}
    with pytest.raises(Exception, match=r"\n  series.0.model.params.sample_rat: unknown field"):
        parse_nightly(bad)


def test_discovery_orders_checkpoints_and_marks_those_without_the_ready_marker(tmp_path) -> None:
    cfg = parse_nightly(demo_data(tmp_path))
    prefix = cfg.series[0].prefix
    for name in ("step-1000", "step-999"):
        write_checkpoint(prefix, name, [])
    (tmp_path / "ck" / "step-1200").mkdir()  # half written: no _SUCCESS
    (tmp_path / "ck" / "_tmp").mkdir()
    cps = discover(cfg.series[0])
    assert [c.name for c in cps] == ["step-999", "step-1000", "step-1200"]
    assert [c.problem for c in cps] == [None, None, "not ready: no _SUCCESS marker"]
    assert discover(cfg.series[0].model_copy(update={"prefix": str(tmp_path / "none")})) == []


def test_a_corrupt_or_newer_ledger_file_is_an_error_naming_the_file(tmp_path) -> None:
    ledger = Ledger(str(tmp_path))
    ledger.put(LedgerRecord("s", "c", Status.FINISHED, attempts=1))
    assert ledger.get("s", "c").status is Status.FINISHED
    path = tmp_path / "ledger" / "s" / "c.json"
    path.write_text("{not json")
    with pytest.raises(LedgerError, match=str(path)):
        ledger.records()
    path.write_text(json.dumps({"version": 99, "series": "s", "checkpoint": "c"}))
    with pytest.raises(LedgerError, match=r"version 99, newer"):
        ledger.get("s", "c")


def test_a_lease_expires_and_a_released_lease_is_free_again(tmp_path) -> None:
    ledger = Ledger(str(tmp_path))
    first = ledger.claim("s", "c", "a", lease_s=60)
    assert first is not None
    assert ledger.claim("s", "c", "late", lease_s=60) is None  # an unexpired lease of another owner
    ledger.release(first)
    short = ledger.claim("s", "c", "late", lease_s=-1)  # free; and this lease is already expired
    assert short is not None
    assert ledger.claim("s", "c", "next", lease_s=60) is not None


def test_holm_matches_the_step_down_rule() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005, np.nan])
    # sorted 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 → max(0.06, 0.04) = 0.06
    np.testing.assert_allclose(compare.holm(p)[:4], [0.03, 0.06, 0.06, 0.02])
    assert np.isnan(compare.holm(p)[4])


def _scores(values: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = [{"protocol": "mcq", "dataset": "d", "condition": cond, "variant": "default", "group": "all",
             "metric": metric, "item_id": f"i{i}", "score": v}
            for (cond, metric), vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_only_a_significant_large_drop_of_correct_or_a_gap_is_flagged() -> None:
    rng = np.random.default_rng(0)
    ref = _scores({("correct", "accuracy"): list(rng.integers(0, 2, 60) | 1),
                   ("random", "accuracy"): [0.0] * 60})
    worse = _scores({("correct", "accuracy"): [0.0] * 30 + [1.0] * 30, ("random", "accuracy"): [1.0] * 60})
    rows = compare.decide(compare.compare_scores(worse, ref, 500, 0.95, 0), lambda m: 0.05, 0.05)
    by = rows.set_index("condition")
    assert by.loc["correct", "flagged"] and by.loc["correct-random", "flagged"]
    assert by.loc["random", "delta"] == 1.0 and not by.loc["random", "flagged"]  # a control has no direction
    same = compare.decide(compare.compare_scores(ref, ref, 500, 0.95, 0), lambda m: 0.05, 0.05)
    assert not same["flagged"].any() and (same["delta"] == 0).all() and (same["p_value"] == 1).all()
    tiny = compare.decide(compare.compare_scores(worse, ref, 500, 0.95, 0), lambda m: 2.0, 0.05)
    assert not tiny["flagged"].any()  # below the minimum effect
    assert set(rows["correction"]) == {"holm"}


def test_listener_checkpoint_mistakes_name_the_param(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"^checkpoint: .* holds no listener.json"):
        read_deaf_to(str(tmp_path))
    (tmp_path / "listener.json").write_text('{"deaf_to": ["smell"]}')
    with pytest.raises(ValueError, match=r"^checkpoint: listener.json deaf_to must be a list of tempo, key"):
        DSPListener.check_files({"checkpoint": str(tmp_path)})
    (tmp_path / "listener.json").write_text('{"deaf": []}')
    with pytest.raises(ValueError, match=r"unknown field"):
        read_deaf_to(str(tmp_path))
    (tmp_path / "listener.json").write_text("[")
    with pytest.raises(ValueError, match=r"not valid JSON"):
        read_deaf_to(str(tmp_path))


def test_a_timbre_deaf_listener_names_no_instrument_but_hears_tempo_and_key(tmp_path) -> None:
    from evalcore.datasets.synthetic import ClipSpec, synthesize_clip

    write_checkpoint(str(tmp_path), "deaf", ["timbre"])
    write_checkpoint(str(tmp_path), "full", [])
    spec = ClipSpec("c", 100.0, "A", "minor", ("bass", "organ", "drums"), 6.0, 0)
    audio = synthesize_clip(spec, 16_000)
    full, deaf = analyze(audio, 16_000), analyze(audio, 16_000, frozenset({"timbre"}))
    assert full.instruments and not deaf.instruments
    assert (deaf.tempo_bpm, deaf.key, deaf.mode) == (full.tempo_bpm, full.key, full.mode)
    model = DSPListener(checkpoint=str(tmp_path / "deaf"))
    assert model.deaf_to == {"timbre"} and model.info()["checkpoint"]["sha256"]
    assert DSPListener().info()["checkpoint"] == "dsp-listener-v1"  # without the param: as before


def test_a_changed_suite_starts_a_new_baseline_instead_of_comparing(tmp_path) -> None:
    from evalcore.nightly.history import finished, references

    cfg = parse_nightly(demo_data(tmp_path))
    recs = [LedgerRecord("listener", c, Status.FINISHED, suite_fingerprint=f)
            for c, f in (("step-1000", "a"), ("step-2000", "a"), ("step-10000", "b"), ("step-3000", "a"))]
    recs.append(LedgerRecord("listener", "step-9", Status.FAILED))
    done = finished(recs, "listener")
    assert [r.checkpoint for r in done] == ["step-1000", "step-2000", "step-3000", "step-10000"]
    refs, notes = references(cfg, "listener", done, 1)
    assert [(r.checkpoint, role) for r, role in refs] == [("step-1000", "previous+baseline")] and not notes
    refs, notes = references(cfg, "listener", done, 3)
    assert refs == [] and "suite changed between step-3000 and step-10000" in notes[0]
    assert "step-10000 starts a new baseline" in notes[0] and "another suite" in notes[1]


def test_an_empty_or_missing_series_prefix_is_a_ledger_row_not_a_crash(tmp_path) -> None:
    data = demo_data(tmp_path)  # tmp_path/ck does not exist
    path = tmp_path / "n.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(app, ["nightly", str(path)])
    assert res.exit_code == 0, res.output
    assert "0 checkpoint(s) evaluated" in res.output
    (row,) = Ledger(data["storage"]["root"]).records()
    assert (row.checkpoint, row.status) == ("_series", Status.WAITING) and "no checkpoints under" in row.reason
    html = (tmp_path / "root" / "dashboard.html").read_text()
    assert "no checkpoints under" in html and "<h2>Tonight</h2>" in html
    write_checkpoint(data["series"][0]["prefix"], "step-1", ["timbre"])
    (tmp_path / "ck" / "step-1" / "_SUCCESS").unlink()  # not ready: nothing to evaluate, the series row goes
    res = CliRunner().invoke(app, ["nightly", str(path)])
    assert res.exit_code == 0, res.output
    rows = {r.checkpoint: r for r in Ledger(data["storage"]["root"]).records()}
    assert set(rows) == {"step-1"} and rows["step-1"].status is Status.WAITING


def test_a_checkpoint_over_its_error_budget_is_failed_never_unchanged(tmp_path, monkeypatch) -> None:
    """A checkpoint whose model errored past ``max_error_rate`` (the run raised ErrorBudgetExceeded after writing
    its tables) is recorded ``failed`` with the message naming the model, and tonight's verdict says so."""
    import evalcore.pipeline.run as pipeline_run
    from evalcore.nightly import night as nt
    from evalcore.nightly.lease import Leases
    from evalcore.core.nightly_outcome import CheckpointKey
    from evalcore.nightly.series import Checkpoint
    from evalcore.pipeline.outcome import ErrorBudgetExceeded, RunResult

    cfg = parse_nightly(demo_data(tmp_path))
    counts = {"requests_in": 10, "requests_errored": 10, "requests_scored": 0,
              "models": {"listener": {"requests_in": 10, "requests_errored": 10, "error_share": 1.0}}}

    def dead(rcfg, resume=False):
        raise ErrorBudgetExceeded(1.0, 0.5, [("model/ValueError", 10)], RunResult(rcfg.root, counts, ""),
                                  model="listener")

    monkeypatch.setattr(pipeline_run, "run", dead)
    ledger = Ledger(cfg.root, Leases())
    lease = ledger.claim("listener", "step-9", "me", 60)
    result = nt.NightResult(root=cfg.root)
    nt.evaluate(cfg, cfg.series[0], Checkpoint(CheckpointKey("listener", "step-9"), str(tmp_path / "ck" / "step-9")), ledger, lease,
                result)
    rec = ledger.get("listener", "step-9")
    assert rec.status is Status.FAILED and "model 'listener' errored on 10 of 10" in rec.reason
    assert result.failed == [CheckpointKey("listener", "step-9")] and not result.evaluated
    verdicts = {v.checkpoint: v.verdict for v in nt.tonight_of(cfg, result, pd.DataFrame()).checkpoints}
    assert verdicts == {"step-9": Verdict.FAILED}
