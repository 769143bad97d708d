"""The offline nightly end to end on a local Ray: the demo series (full, identical copy, deaf to timbre) plus
a broken and a half-written checkpoint; the flags, the ledger, nightly.json; then, under
``fail_on_regression``, a night with nothing new and a night with a new clean checkpoint both exit 0 though
an earlier night flagged step-3000, and a night whose new checkpoint is deaf again exits 3 printing only that
checkpoint's rows; the webhook hears about every night. Each checkpoint evaluated is logged to a local MLflow store
once, at its training step, with its verdict, under the series' own run that draws each metric by step (a night with
nothing new adds nothing)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from evalcore.cli import app
from evalcore.nightly.config import parse_nightly
from evalcore.nightly.demo import DEMO_CHECKPOINTS, demo_config_path, write_checkpoint
from evalcore.nightly.ledger import Ledger
from evalcore.nightly.night import night
from evalcore.nightly.tonight import CHANGE_KEY
from evalcore.core.nightly_outcome import CheckpointKey, Outcome, Status

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_demo_nightly_flags_only_the_timbre_deaf_checkpoint_and_a_second_night_evaluates_nothing(
        tmp_path, local_ray) -> None:
    data = yaml.safe_load(demo_config_path().read_text())
    prefix = tmp_path / "checkpoints"
    data["series"][0]["prefix"] = str(prefix)
    data["storage"] = {"root": str(tmp_path / "nightly")}
    data.update(fail_on_regression=True, max_attempts=1)
    uri = _mlflow_store(tmp_path)  # each checkpoint evaluated is logged to MLflow at its training step
    if uri is not None:
        data["tracking"] = [{"kind": "mlflow", "uri": uri, "experiment": "nightly-demo"}]
    for name, deaf in DEMO_CHECKPOINTS.items():
        write_checkpoint(str(prefix), name, deaf)
    write_checkpoint(str(prefix), "step-4000", ["smell"])  # broken: an analysis the listener does not have
    (prefix / "step-5000").mkdir()  # half written: no _SUCCESS yet
    (prefix / "step-5000" / "listener.json").write_text("{")
    cfg = parse_nightly(data)

    first = night(cfg)
    assert sorted(map(str, first.evaluated)) == ["listener/step-1000", "listener/step-2000", "listener/step-3000"]
    assert first.failed == [CheckpointKey("listener", "step-4000")]
    assert first.keys(Outcome.WAITING) == [CheckpointKey("listener", "step-5000")]
    assert first.exit_code == 3 and set(first.flagged_tonight["checkpoint"]) == {"step-3000"}
    summary = json.loads((tmp_path / "nightly" / "nightly.json").read_text())
    verdicts = {c["checkpoint"]: c["verdict"] for c in summary["checkpoints"]}
    assert verdicts == {"step-1000": "unchanged", "step-2000": "unchanged", "step-3000": "regressed",
                        "step-4000": "failed", "step-5000": "waiting"}
    assert summary["exit_code"] == 3 and summary["store"]["conditional_writes"] is True
    for c in summary["checkpoints"]:  # each run's profile in short (its run.json's), none for one that did not run
        p = c.get("profile")
        if c["checkpoint"] not in DEMO_CHECKPOINTS:
            assert p is None, c
            continue
        assert p["wall_s"] > 0 and 0 < p["first_commit_after_model_start_s"] < p["wall_s"], p
        assert {"items", "decode", "commit", "score", "report"} <= set(p["stages_s"]) and p["models"], p
        assert all(m["answers_per_s"] > 0 and 0 < m["busy_fraction"] <= 1 for m in p["models"].values()), p
    # step-3000's drops, each counted once (flagged against step-2000 and against the baseline), and why
    regressed = next(c for c in summary["checkpoints"] if c["checkpoint"] == "step-3000")
    drops = _flags(tmp_path, "step-3000").drop_duplicates(CHANGE_KEY)
    assert regressed["flagged"] == len(drops) < len(_flags(tmp_path, "step-3000"))
    assert regressed["reason"].startswith(f"{len(drops)} drop(s) flagged (") and "largest: " in regressed["reason"]
    assert "vs the previous checkpoint step-2000" in regressed["reason"] and "vs the baseline " in regressed["reason"]
    n_req = summary["counts"]["requests_sent"]
    assert n_req > 0 and summary["counts"]["requests_committed_earlier"] == 0 and summary["counts"]["evaluated"] == 3
    ledger = {r.checkpoint: r for r in Ledger(cfg.root).records()}
    assert ledger["step-4000"].status is Status.FAILED and "deaf_to" in ledger["step-4000"].reason
    assert ledger["step-5000"].status is Status.WAITING and "_SUCCESS" in ledger["step-5000"].reason
    assert all(ledger[c].status is Status.FINISHED and ledger[c].attempts == 1 for c in DEMO_CHECKPOINTS)
    # the identical copy has the same content identity; the three share one suite fingerprint
    assert ledger["step-1000"].identity["sha256"] == ledger["step-2000"].identity["sha256"]
    assert len({ledger[c].suite_fingerprint for c in DEMO_CHECKPOINTS}) == 1

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
    _flagged_rows_open_the_changed_items(tmp_path, flagged)

    logged = _tracked(uri, {"step-1000": "unchanged", "step-2000": "unchanged", "step-3000": "regressed"})

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
    again = {r.checkpoint: r for r in Ledger(cfg.root).records()}
    assert again["step-4000"].attempts == 1  # max_attempts reached: not tried again
    assert again["step-3000"] == ledger["step-3000"]
    page = (tmp_path / "nightly" / "dashboard.md").read_text()
    assert "## Tonight\n\n0 checkpoint(s) evaluated (0 resumed), 0 failed, 1 waiting" in page  # step-5000 waits
    assert _tracked(uri, {"step-1000": "unchanged", "step-2000": "unchanged", "step-3000": "regressed"}) == logged

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
    res = CliRunner().invoke(app, ["nightly", str(path), "--quiet"], env={"EVALCORE_TEST_WEBHOOK": url})
    assert res.exit_code == 3, res.output
    # --quiet: no opening or summary line, no line for the checkpoint that is fine; the regression and its rows stay
    assert "evalcore: nightly" not in res.output and "nightly tonight:" not in res.output
    assert "listener/step-5000: waiting" not in res.output
    assert "listener/step-7000: regressed, listens yes — " in res.output
    printed = [line for line in res.output.splitlines() if line.startswith("listener ")]
    assert printed and all(line.split()[1] == "step-7000" for line in printed), printed  # only tonight's rows
    assert "listener/step-7000: regressed" in res.output
    server.shutdown()
    n_flags = len(_flags(tmp_path, "step-7000").drop_duplicates(CHANGE_KEY))  # each drop once, whatever its reference
    assert [h["text"].splitlines()[1] for h in heard] == [  # deaf to timbre only, step-7000 still hears tempo, key
        "• listener/step-6000: improved, listens yes", f"• listener/step-7000: regressed, listens yes, {n_flags} flagged"]
    assert all("dashboard.html" in h["text"] for h in heard)
    last = json.loads((tmp_path / "nightly" / "nightly.json").read_text())
    assert last["exit_code"] == 3 and [(c["checkpoint"], c["verdict"]) for c in last["checkpoints"]] == [
        ("step-7000", "regressed"), ("step-5000", "waiting")]
    last_logged = _tracked(uri, {"step-1000": "unchanged", "step-2000": "unchanged", "step-3000": "regressed",
                                 "step-6000": "improved", "step-7000": "regressed"})
    if uri is not None:  # the whole nightly replayed into the same store: every checkpoint is there, nothing is added
        res = CliRunner().invoke(app, ["track", str(tmp_path / "nightly"), "--track", f"mlflow={uri}"])
        assert res.exit_code == 0 and res.stdout.count("already logged") == 5, res.output
        assert _tracked(uri, {"step-1000": "unchanged", "step-2000": "unchanged", "step-3000": "regressed",
                              "step-6000": "improved", "step-7000": "regressed"}) == last_logged


def _mlflow_store(tmp_path) -> str | None:
    if importlib.util.find_spec("mlflow") is None:  # the tracking extra is not installed: no sink
        return None
    from tracking_helpers import fresh_mlflow_uri

    return fresh_mlflow_uri(tmp_path / "mlflow")


def _tracked(uri: str | None, verdicts: dict[str, str]) -> dict:
    """MLflow read back with its own client: one run per checkpoint evaluated, tagged with its step and verdict, every
    metric one point at that step; the series' own run, parent of them all, holds each metric once per checkpoint's
    step (MLflow's curve by step). Returns (run id, points) per run, to see that a night adds nothing."""
    if uri is None:
        return {}
    from mlflow import MlflowClient

    from tracking_helpers import mlflow_runs, same

    client = MlflowClient(tracking_uri=uri)
    found = mlflow_runs(uri, "nightly-demo")
    (parent,) = [r for r in found if r.data.tags.get("evalcore.series_run") == "true"]
    runs = {r.data.tags["evalcore.checkpoint"]: r for r in found if r is not parent}
    assert {c: r.data.tags["evalcore.verdict"] for c, r in runs.items()} == verdicts
    out, keys = {}, None
    for ck, r in runs.items():
        step = int(ck.removeprefix("step-"))
        assert r.data.tags["evalcore.step"] == str(step) and r.info.run_name == f"listener@{ck}"
        assert r.data.tags["mlflow.parentRunId"] == parent.info.run_id
        assert (int(r.data.tags["evalcore.flagged"]) > 0) == (verdicts[ck] == "regressed")
        if verdicts[ck] == "regressed":
            assert "flagged" in r.data.tags["mlflow.note.content"] and " vs step-" in r.data.tags["mlflow.note.content"]
        keys = keys or set(r.data.metrics)
        assert set(r.data.metrics) == keys and "mcq/synth/correct-random/accuracy" in keys
        points = [client.get_metric_history(r.info.run_id, k) for k in sorted(keys)]
        assert all([h.step for h in p] == [step] and same(p[0].value, r.data.metrics[p[0].key]) for p in points), ck
        out[ck] = (r.info.run_id, sum(len(p) for p in points))
    steps = sorted(int(ck.removeprefix("step-")) for ck in runs)
    assert parent.info.run_name == "listener (series)" and set(parent.data.metrics) == keys
    for k in sorted(keys):  # one point per checkpoint, each at its step, equal to the checkpoint's own run
        curve = sorted((h.step, h.value) for h in client.get_metric_history(parent.info.run_id, k))
        assert [x for x, _ in curve] == steps, k
        assert all(same(v, runs[f"step-{x}"].data.metrics[k]) for x, v in curve), k
    out["series"] = (parent.info.run_id, len(keys) * len(steps))
    return out


def _changed(tmp_path, cur: str, ref: str, protocol: str, condition: str, column: str) -> int:
    """How many items' per-item score (``column``, option orders averaged; a gap ``correct-<control>``: its
    per-item difference) differs between the runs of checkpoints ``cur`` and ``ref``, over all their items."""
    def scores(ck: str) -> pd.Series:
        pi = pd.read_parquet(tmp_path / "nightly" / "runs" / "listener" / ck / "tables" / "per_item.parquet")
        s = pi[pi["protocol"] == protocol].groupby(["condition", "item_id"])[column].mean()
        return (s["correct"] - s[condition.split("-", 1)[1]]).dropna() if "-" in condition else s[condition]

    both = pd.concat([scores(cur), scores(ref)], axis=1, join="inner").to_numpy(dtype=float)
    return int((~np.isclose(both[:, 0], both[:, 1])).sum())


def _flagged_rows_open_the_changed_items(tmp_path, flagged: pd.DataFrame) -> None:
    """Every flagged row of tonight's regressed checkpoint links to its item browser, which shows the items whose
    outcome changed against the reference (counted here from both runs' per_item tables), read in Chromium."""
    import chromium as chromium_
    from cdp import Chromium

    html = (tmp_path / "nightly" / "dashboard.html").read_text()
    links = re.findall(r'<a href="(runs/listener/step-3000/items\.html#sel=[^"]+)"', html)
    assert len(set(links)) == len(links) == len(flagged[flagged["checkpoint"] == "step-3000"])  # one per flagged row
    if chromium_.CHROMIUM is None and os.environ.get("CI") != "true":
        return
    with Chromium(tmp_path / "profile") as browser:
        page = browser.page((tmp_path / "nightly" / "dashboard.html").as_uri())
        for ref, protocol, condition, column in (("step-2000", "factual", "correct", "f1"),
                                                 ("step-1000", "factual", "correct-random", "f1")):
            row = flagged[(flagged["reference"] == ref) & (flagged["protocol"] == protocol)
                          & (flagged["condition"] == condition) & (flagged["metric"] == column)
                          & (flagged["group"] == "all")]
            assert len(row) == 1
            page.goto((tmp_path / "nightly" / "dashboard.html").as_uri())
            page.eval(f"[...document.querySelectorAll('tr.flag')].find(tr => tr.textContent.includes("
                      f"{json.dumps(protocol + ' · synth')}) && tr.children[1].textContent === {json.dumps(condition)}"
                      f" && tr.closest('details').querySelector('summary').textContent.includes('vs {ref}')"
                      f" && tr.children[3].textContent.replace(/\u200b/g, '') === {json.dumps(column)})"
                      ".querySelector('a').click()")
            page.wait("location.pathname.endsWith('/step-3000/items.html') && document.body.dataset.state")
            changed = _changed(tmp_path, "step-3000", ref, protocol, condition, "f1")
            assert int(page.eval("document.body.dataset.total")) == changed > 0
            assert page.eval("document.querySelectorAll('article.item p.changed').length") == min(changed, 25)


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
