"""The nightly's outcome types read what the nightly wrote before they existed: the ledger records and the
``nightly.json`` in ``fixtures/nightly_v1`` were written by the nightly's code at 4e5aef1 (dicts, strings); read as
:class:`LedgerRecord` / :class:`Tonight` they keep every key and value, and written again they keep their shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from evalcore.nightly.ledger import Ledger, LedgerError
from evalcore.nightly.tonight import write
from evalcore.core.nightly_outcome import CheckpointKey, LedgerRecord, Status, Tonight, Verdict
from evalcore.reports.dashboard import render

OLD = Path(__file__).parent / "fixtures" / "nightly_v1"


def _old_records() -> dict[str, dict]:
    return {f"{p.parent.name}/{p.stem}": json.loads(p.read_text()) for p in sorted((OLD / "ledger").rglob("*.json"))}


def test_old_ledger_records_read_as_types_and_keep_their_shape_when_written_again(tmp_path) -> None:
    shutil.copytree(OLD, tmp_path / "root")
    ledger = Ledger(str(tmp_path / "root"))
    records = {str(r.key): r for r in ledger.records()}
    old = _old_records()
    assert set(records) == set(old) == {"listener/step-2000", "listener/step-4000", "listener/step-5000",
                                        "empty/_series"}
    for key, rec in records.items():
        assert isinstance(rec.status, Status) and rec.status == old[key]["status"]
        assert {k: v for k, v in rec.as_json().items() if k in old[key]} == {k: v for k, v in old[key].items()
                                                                             if k != "version"}
    assert records["listener/step-2000"].identity["sha256"] == "ab" * 32
    assert records["listener/step-4000"].status is Status.FAILED and records["listener/step-4000"].attempts == 1
    for rec in records.values():  # written again by today's ledger: the same keys and values (and nulls for
        ledger.put(rec)            # the fields an old record never set), statuses as the same strings
        again = json.loads((tmp_path / "root" / "ledger" / rec.series / f"{rec.checkpoint}.json").read_text())
        before = old[str(rec.key)]
        assert {k: again[k] for k in before if k != "updated"} == {k: v for k, v in before.items() if k != "updated"}
        assert all(again[k] is None for k in set(again) - set(before))
        assert ledger.get(rec.series, rec.checkpoint) == rec.but(updated=again["updated"])


def test_a_key_this_evalcore_does_not_know_is_kept_and_an_unknown_status_names_the_file(tmp_path) -> None:
    ledger = Ledger(str(tmp_path))
    path = tmp_path / "ledger" / "s" / "c.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "series": "s", "checkpoint": "c", "status": "finished", "gpu": "h100"}))
    rec = ledger.get("s", "c")
    assert rec.extra == {"gpu": "h100"}
    ledger.put(rec.but(attempts=2))
    assert json.loads(path.read_text())["gpu"] == "h100"
    path.write_text(json.dumps({"version": 1, "series": "s", "checkpoint": "c", "status": "paused"}))
    with pytest.raises(LedgerError, match=rf"{path} is corrupt \('paused' is not a valid Status\)"):
        ledger.records()


def test_an_old_nightly_json_reads_as_a_tonight_and_is_written_again_byte_for_byte(tmp_path, monkeypatch) -> None:
    text = (OLD / "nightly.json").read_text()
    t = Tonight.from_json(json.loads(text))
    assert [(str(v.key), v.verdict) for v in t.checkpoints] == [
        ("listener/step-2000", Verdict.REGRESSED), ("listener/step-3000", Verdict.IMPROVED),
        ("listener/step-4000", Verdict.FAILED), ("listener/step-5000", Verdict.WAITING),
        ("other/step-1", Verdict.LEASED), ("other/step-2", Verdict.LOST)]
    assert t.counts.leased_elsewhere == 1 and t.store is None and t.exit_code == 3
    assert t.checkpoints[0].key == CheckpointKey("listener", "step-2000")
    monkeypatch.chdir(tmp_path)
    write(t)  # under its root, "nightly_v1": relative to the working directory
    assert (tmp_path / "nightly_v1" / "nightly.json").read_text() == text


def test_the_dashboard_renders_an_old_night_and_ledger() -> None:
    t = Tonight.from_json(json.loads((OLD / "nightly.json").read_text()))
    records = [LedgerRecord.from_json(r) for r in _old_records().values()]
    _, md = render(t, pd.DataFrame(), pd.DataFrame(), records, [], pd.DataFrame())
    assert "| **listener/step-2000** | **▼\u00a0regressed** | **no** | **12** | **12 drop(s) flagged** |" in md
    assert "| listener/step-3000 | ▲\u00a0improved (resumed) | yes |  | 2 significant gain(s) |" in md
    assert "| **listener** | **step-4000** | **failed** | **1** |" in md and "| empty | _series | waiting | 0 |" in md
