"""The offline nightly end to end on a local Ray: the demo series (full, identical copy, deaf to timbre) plus
a broken and a half-written checkpoint; the flags, the ledger, nightly.json; then, under
``fail_on_regression``, a night with nothing new and a night with a new clean checkpoint both exit 0 though
an earlier night flagged step-3000, and a night whose new checkpoint is deaf again exits 3 printing only that
checkpoint's rows; the webhook hears about every night."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

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
    assert first.failed == ["listener/step-4000"] and first.waiting == ["listener/step-5000"]
    assert first.exit_code == 3 and set(first.flagged_tonight["checkpoint"]) == {"step-3000"}
    summary = json.loads((tmp_path / "nightly" / "nightly.json").read_text())
    verdicts = {c["checkpoint"]: c["verdict"] for c in summary["checkpoints"]}
    assert verdicts == {"step-1000": "unchanged", "step-2000": "unchanged", "step-3000": "regressed",
                        "step-4000": "failed", "step-5000": "waiting"}
    assert summary["exit_code"] == 3 and summary["store"]["conditional_writes"] is True
    for c in summary["checkpoints"]:  # each run's profile in short (its run.json's), none for one that did not run
        p = c["profile"]
        if c["checkpoint"] not in DEMO_CHECKPOINTS:
            assert p is None, c
            continue
        assert p["wall_s"] > 0 and 0 < p["first_commit_after_model_start_s"] < p["wall_s"], p
        assert {"items", "decode", "commit", "score", "report"} <= set(p["stages_s"]) and p["models"], p
        assert all(m["answers_per_s"] > 0 and 0 < m["busy_fraction"] <= 1 for m in p["models"].values()), p
    n_req = summary["counts"]["requests_sent"]
    assert n_req > 0 and summary["counts"]["requests_committed_earlier"] == 0 and summary["counts"]["evaluated"] == 3
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
    assert "<h2>Tonight</h2>" in html and html.count("<img") >= 3
    assert "listener/step-3000 vs step-2000 (previous): " in html and "<details open>" in html
    assert "## Tonight" in (tmp_path / "nightly" / "dashboard.md").read_text()

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
    assert res.exit_code == 0, res.output  # nothing new tonight: step-3000's old flags do not fail it
    assert "tonight: 0 checkpoint(s) evaluated (0 resumed)" in res.output
    assert "0 request(s) sent to models" in res.output and "from earlier nights, on the dashboard" in res.output
    assert "task=instrument_mcq" not in res.output  # no old rows printed
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "nightly" / "runs").rglob("*")) == runs_before
    again = {r["checkpoint"]: r for r in Ledger(cfg.root).records()}
    assert again["step-4000"]["attempts"] == 1  # max_attempts reached: not tried again
    assert json.dumps(again["step-3000"], sort_keys=True) == json.dumps(ledger["step-3000"], sort_keys=True)
    page = (tmp_path / "nightly" / "dashboard.md").read_text()
    assert "## Tonight\n\n0 checkpoint(s) evaluated (0 resumed), 0 failed, 1 waiting" in page  # step-5000 waits

    heard: list[dict] = []
    server = _webhook(heard)
    data["notify"] = {"url_env": "EVALCORE_TEST_WEBHOOK"}
    path.write_text(yaml.safe_dump(data))
    url = f"http://127.0.0.1:{server.server_port}/hooks/SECRET-TOKEN"
    write_checkpoint(str(prefix), "step-6000", [])  # hears everything again
    res = CliRunner().invoke(app, ["nightly", str(path)], env={"EVALCORE_TEST_WEBHOOK": url})
    assert res.exit_code == 0, res.output  # a clean new checkpoint
    assert "listener/step-6000: improved" in res.output  # over step-3000; unchanged against the baseline
    assert "SECRET-TOKEN" not in res.output
    write_checkpoint(str(prefix), "step-7000", ["timbre"])  # deaf to timbre again
    res = CliRunner().invoke(app, ["nightly", str(path)], env={"EVALCORE_TEST_WEBHOOK": url})
    assert res.exit_code == 3, res.output
    printed = [line for line in res.output.splitlines() if line.startswith("listener ")]
    assert printed and all(line.split()[1] == "step-7000" for line in printed), printed  # only tonight's rows
    assert "listener/step-7000: regressed" in res.output
    server.shutdown()
    n_flags = len(_flags(tmp_path, "step-7000"))
    assert [h["text"].splitlines()[1] for h in heard] == [  # deaf to timbre only, step-7000 still hears tempo, key
        "• listener/step-6000: improved, listens yes", f"• listener/step-7000: regressed, listens yes, {n_flags} flagged"]
    assert all("dashboard.html" in h["text"] for h in heard)
    last = json.loads((tmp_path / "nightly" / "nightly.json").read_text())
    assert last["exit_code"] == 3 and [(c["checkpoint"], c["verdict"]) for c in last["checkpoints"]] == [
        ("step-7000", "regressed"), ("step-5000", "waiting")]


def _flags(tmp_path, checkpoint: str) -> pd.DataFrame:
    reg = pd.read_parquet(tmp_path / "nightly" / "regressions.parquet")
    return reg[reg["flagged"] & (reg["checkpoint"] == checkpoint)]


def _webhook(heard: list[dict]) -> HTTPServer:
    """A Slack-style incoming webhook on 127.0.0.1 that keeps every JSON body it is sent."""

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            heard.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
