"""The offline nightly end to end on a local Ray: the demo series (full, identical copy, deaf to timbre) plus
a broken and a half-written checkpoint; the flags, the ledger, a second night that evaluates nothing and
exits 3 under ``fail_on_regression`` with the flagged rows printed."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.nightly.config import parse_nightly
from evalcore.nightly.demo import DEMO_CHECKPOINTS, demo_config_path, write_checkpoint
from evalcore.nightly.ledger import Ledger
from evalcore.nightly.night import night

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_demo_nightly_flags_only_the_timbre_deaf_checkpoint_and_a_second_night_evaluates_nothing(
        tmp_path, local_ray) -> None:
    data = yaml.safe_load(demo_config_path().read_text())
    prefix = tmp_path / "checkpoints"
    data["series"][0]["prefix"] = str(prefix)
    data["storage"] = {"root": str(tmp_path / "nightly")}
    data.update(fail_on_regression=True, max_attempts=1)
    for name, deaf in DEMO_CHECKPOINTS.items():
        write_checkpoint(str(prefix), name, deaf)
    write_checkpoint(str(prefix), "step-4000", ["smell"])  # broken: an analysis the listener does not have
    (prefix / "step-5000").mkdir()  # half written: no _SUCCESS yet
    (prefix / "step-5000" / "listener.json").write_text("{")
    cfg = parse_nightly(data)

    first = night(cfg)
    assert sorted(first.evaluated) == ["listener/step-1000", "listener/step-2000", "listener/step-3000"]
    assert first.failed == ["listener/step-4000"]
    ledger = {r["checkpoint"]: r for r in Ledger(cfg.root).records()}
    assert ledger["step-4000"]["status"] == "failed" and "deaf_to" in ledger["step-4000"]["reason"]
    assert ledger["step-5000"]["status"] == "waiting" and "_SUCCESS" in ledger["step-5000"]["reason"]
    assert all(ledger[c]["status"] == "finished" and ledger[c]["attempts"] == 1 for c in DEMO_CHECKPOINTS)
    # the identical copy has the same content identity; the three share one suite fingerprint
    assert ledger["step-1000"]["identity"]["sha256"] == ledger["step-2000"]["identity"]["sha256"]
    assert len({ledger[c]["suite_fingerprint"] for c in DEMO_CHECKPOINTS}) == 1

    reg = pd.read_parquet(tmp_path / "nightly" / "regressions.parquet")
    flagged = reg[reg["flagged"]]
    assert set(flagged["checkpoint"]) == {"step-3000"}
    assert not reg[reg["checkpoint"] == "step-2000"]["delta"].abs().gt(0).any()  # the copy answers identically
    keys = set(zip(flagged["reference"], flagged["protocol"], flagged["condition"], flagged["metric"],
                   flagged["group"]))
    for ref in ("step-1000", "step-2000"):  # the pinned baseline and the previous checkpoint
        assert (ref, "factual", "correct", "f1", "all") in keys
        assert (ref, "mcq", "correct", "accuracy", "task=instrument_mcq") in keys
        assert (ref, "factual", "correct-random", "f1", "all") in keys  # the listening gap shrank
    assert not flagged["group"].isin(["task=tempo", "task=mode"]).any()  # it still hears tempo and key
    assert (reg["correction"] == "holm").all() and reg["p_adjusted"].ge(reg["p_value"]).all()
    hist = pd.read_parquet(tmp_path / "nightly" / "history.parquet")
    assert set(hist["checkpoint"]) == set(DEMO_CHECKPOINTS)
    html = (tmp_path / "nightly" / "dashboard.html").read_text()
    assert f"Flagged regressions ({len(flagged)})" in html and html.count("<img") >= 3
    assert "Flagged regressions" in (tmp_path / "nightly" / "dashboard.md").read_text()

    runs = tmp_path / "nightly" / "runs" / "listener"  # the ad-hoc A/B of two runs: the same comparison
    res = CliRunner().invoke(app, ["compare", str(runs / "step-2000"), str(runs / "step-3000"),
                                   "--out", str(tmp_path / "ab")])
    assert res.exit_code == 0, res.output
    ab = pd.read_parquet(tmp_path / "ab" / "compare.parquet")
    mine = reg[(reg["checkpoint"] == "step-3000") & (reg["reference"] == "step-2000")]
    assert set(ab[ab["flagged"]]["metric"]) == set(mine[mine["flagged"]]["metric"])
    assert "Holm" in (tmp_path / "ab" / "compare.md").read_text()
    assert (tmp_path / "ab" / "compare.html").read_text().startswith("<!doctype html>")

    runs_before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "nightly" / "runs").rglob("*"))
    path = tmp_path / "nightly.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(app, ["nightly", str(path)])
    assert res.exit_code == 3, res.output
    assert "0 checkpoint(s) evaluated (0 requests)" in res.output
    assert "step-3000" in res.output and "task=instrument_mcq" in res.output  # the flagged rows are printed
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "nightly" / "runs").rglob("*")) == runs_before
    again = {r["checkpoint"]: r for r in Ledger(cfg.root).records()}
    assert again["step-4000"]["attempts"] == 1  # max_attempts reached: not tried again
    assert json.dumps(again["step-3000"], sort_keys=True) == json.dumps(ledger["step-3000"], sort_keys=True)
