"""The nightly's webhook and nightly.json, against HTTP servers this test starts on 127.0.0.1: a Slack-style
body with one line per checkpoint; a webhook that answers 500, one that is unreachable and one whose variable
is unset never fail the night and never log the URL (its path is the secret)."""

from __future__ import annotations

import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from evalcore.nightly import tonight as tn
from evalcore.core.nightly_outcome import CheckpointVerdict, Counts, LedgerRecord, Status, Tonight
from ports import free_ports

SECRET = "T000/B000/XXXXSECRETXXXX"


def _server(status: int, heard: list[dict]) -> HTTPServer:
    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            heard.append({"path": self.path, "type": self.headers["Content-Type"],
                          "body": json.loads(self.rfile.read(int(self.headers["Content-Length"])))})
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _tonight(root: str) -> Tonight:
    return Tonight("demo", "2026-11-27T03:00:00Z", root, [
        CheckpointVerdict("listener", "step-3000", "regressed", "no", flagged=12),
        CheckpointVerdict("listener", "step-4000", "failed", reason="ConfigError: bad checkpoint"),
        CheckpointVerdict("other", "step-9", "improved", "yes", improved=2, resumed=True)],
        Counts(evaluated=2, resumed=1, failed=1, requests_sent=10, requests_committed_earlier=5), None, 3)


def test_the_webhook_gets_one_line_per_checkpoint_and_the_dashboard(tmp_path, monkeypatch) -> None:
    heard: list[dict] = []
    server = _server(200, heard)
    monkeypatch.setenv("HOOK", f"http://127.0.0.1:{server.server_port}/services/{SECRET}")
    try:
        assert tn.notify("HOOK", _tonight(str(tmp_path)), timeout_s=5)
    finally:
        server.shutdown()
    (got,) = heard
    assert got["path"] == f"/services/{SECRET}" and got["type"] == "application/json"
    assert got["body"]["text"].splitlines() == [
        "evalcore nightly demo (2026-11-27T03:00:00Z): exit 3",
        "• listener/step-3000: regressed, listens no, 12 flagged",
        "• listener/step-4000: failed: ConfigError: bad checkpoint",
        "• other/step-9: improved, listens yes",
        f"dashboard: {tmp_path}/dashboard.html"]


@pytest.mark.parametrize("case", ["500", "unreachable", "unset"])
def test_a_failing_webhook_never_fails_the_night_nor_logs_its_url(tmp_path, monkeypatch, caplog, case) -> None:
    heard: list[dict] = []
    server = _server(500, heard) if case == "500" else None
    port = server.server_port if server else free_ports(1)[0]
    if case != "unset":
        monkeypatch.setenv("HOOK", f"http://127.0.0.1:{port}/services/{SECRET}")
    else:
        monkeypatch.delenv("HOOK", raising=False)
    with caplog.at_level(logging.DEBUG, logger="evalcore"):
        ok = tn.notify("HOOK", _tonight(str(tmp_path)), timeout_s=5)
    if server:
        server.shutdown()
    assert ok is False
    text = caplog.text
    assert "HOOK" in text and SECRET not in text and "127.0.0.1" not in text
    assert {"500": "HTTP 500", "unreachable": "ConnectionRefusedError", "unset": "is not set"}[case] in text
    assert len(heard) == (1 if case == "500" else 0)


def test_nightly_json_holds_verdicts_counts_paths_and_the_exit_code(tmp_path) -> None:
    tn.write(_tonight(str(tmp_path)))
    out = json.loads((tmp_path / "nightly.json").read_text())
    assert out["exit_code"] == 3 and out["date"] == "2026-11-27T03:00:00Z"
    assert [(c["checkpoint"], c["verdict"]) for c in out["checkpoints"]] == [
        ("step-3000", "regressed"), ("step-4000", "failed"), ("step-9", "improved")]
    assert out["counts"]["requests_sent"] == 10 and out["counts"]["requests_committed_earlier"] == 5
    assert out["store"] == {"conditional_writes": True, "fallback": None}
    assert out["paths"]["dashboard_html"] == f"{tmp_path}/dashboard.html"


def test_series_sharing_a_suite_get_a_leaderboard_paired_over_shared_items(tmp_path) -> None:
    """Two series with the same suite fingerprint: the leader per metric, the other compared with it over the
    items both scored (24 of 30: each run misses some), its drop significant; a third series on another suite
    is left out."""
    import pandas as pd
    import yaml

    from evalcore.nightly.config import parse_nightly
    from evalcore.nightly.demo import demo_config_path
    from evalcore.nightly.leaderboard import leaderboard

    data = yaml.safe_load(demo_config_path().read_text())
    series = data["series"][0]
    data["series"] = [{**series, "name": n, "prefix": str(tmp_path / n)} for n in ("alpha", "beta", "gamma")]
    data["storage"] = {"root": str(tmp_path / "root")}
    cfg = parse_nightly(data)

    def run(name: str, correct: list[int], ids: range) -> LedgerRecord:
        root = tmp_path / "runs" / name
        (root / "tables").mkdir(parents=True)
        rows = [{"protocol": "mcq", "dataset": "synth", "condition": "correct", "variant": "default", "task": "t",
                 "item_id": f"i{i:02d}", "correct": float(c)} for i, c in zip(ids, correct)]
        pd.DataFrame(rows).to_parquet(root / "tables" / "per_item.parquet")
        return LedgerRecord(name, "step-9", Status.FINISHED, run_root=str(root), identity={"sha256": name},
                            suite_fingerprint="gamma-suite" if name == "gamma" else "shared",
                            finished="2026-11-27T03:00:00Z")

    records = [run("alpha", [1] * 27, range(0, 27)), run("beta", [1, 0] * 13 + [1], range(3, 30)),
               run("gamma", [0] * 30, range(30))]
    board = leaderboard(cfg, records).set_index("series")
    assert sorted(board.index) == ["alpha", "beta"]  # gamma ran another suite
    assert board.loc["alpha", "leader"] == "alpha" and board.loc["alpha", "delta"] == 0.0
    beta = board.loc["beta"]
    assert beta["leader"] == "alpha" and beta["n"] == 24  # items 3..26: scored by both
    assert beta["delta"] == pytest.approx(-0.5) and beta["ci_high"] < 0 and beta["p_adjusted"] < 0.05
    assert beta["value"] == pytest.approx(0.5) and beta["leader_value"] == 1.0
