"""Commit markers are whole or absent (issue 47): a marker that is empty, cut or not a marker's JSON (an older
evalcore's S3 write cut by a killed worker, or a hand) counts as not committed, is said, and is deleted by a resume
with its data files, so that its requests run again; a resumed request lost again is recorded as lost, not counted
committed by its earlier row."""

from __future__ import annotations

import json
import logging

import numpy as np
import soundfile as sf

from evalcore.core import storage
from evalcore.runconfig.config import parse_config
from evalcore.core.errors import TRANSIENT
from evalcore.core.item_table import ItemTable
from evalcore.pipeline import commit
from evalcore.pipeline.run import account_for_all, read_items
from evalcore.protocols.requests import expansion, iter_requests


def _row(rid: str, **kw) -> dict:
    return {"request_id": rid, "chunk_index": 0, "n_chunks": 1, "dataset": "d", "item_id": rid, "protocol": "mcq",
            "model": "m", "condition": "correct", "variant": "v", "option_order": 0, "text": rid, "error": None,
            "error_stage": None, "error_class": None, **kw}


def _committed(tmp_path) -> tuple[storage.RunStorage, list[str]]:
    out = storage.RunStorage(str(tmp_path))
    keys = [commit.commit_shard(out, [_row("a"), _row("b")]), commit.commit_shard(out, [_row("c")])]
    return out, keys


def test_markers_not_whole_count_as_not_committed_and_are_said(tmp_path, caplog) -> None:
    out, keys = _committed(tmp_path)
    marker = tmp_path / "_commits" / f"shard-{keys[0]}.json"
    whole = marker.read_text()
    for torn in ("", whole[: len(whole) // 2], "[]", json.dumps({"key": keys[0]})):  # empty, cut, not a marker
        marker.write_text(torn)
        with caplog.at_level(logging.WARNING, logger="evalcore"):
            assert [m["key"] for m in commit.shard_markers(str(tmp_path))] == [keys[1]]
            assert commit.load_index(str(tmp_path)).request_ids == {"c"}
            assert commit.committed_count(str(tmp_path)) == 1
        assert f"shard-{keys[0]}.json is not whole" in caplog.text
        caplog.clear()


def test_a_resume_deletes_a_marker_not_whole_and_its_data_files(tmp_path) -> None:
    out, keys = _committed(tmp_path)
    (tmp_path / "_commits" / f"shard-{keys[0]}.json").write_bytes(b"")
    gone = {uri.rsplit("/", 1)[-1] for uri in commit.clean_uncommitted(out)}
    assert gone == {f"shard-{keys[0]}.json", f"{keys[0]}.parquet"}  # the marker, its responses and judgments
    assert not list((tmp_path / "responses").glob(f"{keys[0]}*")) and not list((tmp_path / "judgments").glob(f"{keys[0]}*"))
    assert [m["key"] for m in commit.shard_markers(str(tmp_path))] == [keys[1]]


def test_an_items_marker_not_whole_is_not_committed(tmp_path) -> None:
    out = storage.RunStorage(str(tmp_path))
    commit.commit_items(out, ItemTable.from_rows([]), [], 0)
    (tmp_path / "_commits" / commit.ITEMS_MARKER).write_text('{"items": 0')
    assert commit.load_items(str(tmp_path)) is None
    assert f"{commit.ITEMS_MARKER}" in {u.rsplit("/", 1)[-1] for u in commit.clean_uncommitted(out)}


def _config(tmp_path):
    sf.write(tmp_path / "c.wav", np.zeros(16_000, dtype="float32"), 16_000)
    items = [{"item_id": f"q{i}", "protocol": "mcq", "audio_uri": "c.wav", "question": "Fast or slow?",
              "options": ["slow", "fast"], "correct_option": 0} for i in range(2)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    return parse_config({"name": "t", "datasets": [{"name": "d", "kind": "items_file",
                                                    "params": {"path": str(tmp_path / "items.jsonl")}}],
                         "models": [{"name": "m", "kind": "text_prior"}],
                         "protocols": [{"name": "mcq", "conditions": ["correct"]}],
                         "storage": {"root": str(tmp_path / "run")}})


def test_a_resumed_request_lost_again_is_recorded_lost(tmp_path) -> None:
    cfg = _config(tmp_path)
    items, _, _ = read_items(cfg)
    exp = expansion(cfg, items)
    requests = list(iter_requests(cfg, items, exp))
    assert len(requests) == 2
    out = storage.RunStorage(cfg.root)
    lost = {"chunk_index": 0, "n_chunks": 1, "error_stage": "pipeline", "error_class": TRANSIENT,
            "error": "lost: no row came back from the pipeline"}
    commit.commit_shard(out, [{**requests[0], "chunk_index": 0, "n_chunks": 1}, {**requests[1], **lost}])
    again = frozenset({requests[1]["request_id"]})  # the resume (attempt 1) ran it again: nothing came back
    assert account_for_all(cfg, items, exp, 2, out) == 0  # as a first attempt sees it: every request has a row
    assert account_for_all(cfg, items, exp, 2, out, attempt=1, again=again) == 1
    index = commit.load_index(cfg.root)
    assert index.attempt_of == {requests[0]["request_id"]: 0, requests[1]["request_id"]: 1}
    assert index.errors[requests[1]["request_id"]] == {TRANSIENT}
    assert len(commit.load_committed(cfg.root).rows) == 2  # the later attempt's row supersedes, nothing twice
    assert account_for_all(cfg, items, exp, 2, out, attempt=1, again=again) == 0  # now this attempt holds it
