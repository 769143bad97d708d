"""The index in every shard marker: a resume learns what was committed from the markers alone."""

from __future__ import annotations

import json

import pytest

from evalcore.core import storage
from evalcore.pipeline import commit
from evalcore.pipeline.commit import RunStateError, commit_shard, load_committed, load_index, load_requests
from evalcore.pipeline.resume import retried_requests


def _row(rid: str, chunk: int = 0, n: int = 1, error: str | None = None, stage: str | None = None,
         cls: str | None = None) -> dict:
    return {"request_id": rid, "chunk_index": chunk, "n_chunks": n, "dataset": "d", "item_id": rid,
            "protocol": "factual", "model": "m", "condition": "correct", "variant": "v", "option_order": 0,
            "text": f"{rid}/{chunk}", "error": error, "error_stage": stage, "error_class": cls}


def _run(tmp_path) -> tuple[storage.RunStorage, dict[str, str]]:
    out = storage.RunStorage(str(tmp_path))
    keys = {"first": commit_shard(out, [_row("a"), _row("b", 0, 2), _row("b", 1, 2, "timeout", "model", "transient")]),
            "second": commit_shard(out, [_row("c", error="HTTP 400", stage="judge", cls="input"), _row("d")]),
            "again": commit_shard(out, [_row("b", 0, 2), _row("b", 1, 2)], attempt=1)}
    return out, keys


def _marker(tmp_path, key: str):
    return tmp_path / "_commits" / f"shard-{key}.json"


def test_index_says_what_the_rows_say(tmp_path):
    _run(tmp_path)
    rows, index = load_committed(str(tmp_path)).rows, load_index(str(tmp_path))
    assert index.request_ids == load_committed(str(tmp_path)).request_ids == {"a", "b", "c", "d"}
    assert index.errors == {"a": set(), "b": set(), "c": {"input"}, "d": set()}  # b's later attempt succeeded
    assert index.next_attempt == 2
    for classes in ({"transient"}, {"input"}, {"input", "transient"}, set()):
        assert index.with_errors(classes) == set(retried_requests(rows, classes))


def test_index_needs_no_data_file_but_the_retried_shards(tmp_path):
    out, keys = _run(tmp_path)
    for key in (keys["first"], keys["again"]):  # only the shard of c is needed to run c again
        (tmp_path / "responses" / f"{key}.parquet").unlink()
    index = load_index(str(tmp_path))
    assert index.request_ids == {"a", "b", "c", "d"}
    got = load_requests(str(tmp_path), index, {"c"})
    assert [(r["request_id"], r["error"], r["text"]) for r in got] == [("c", "HTTP 400", "c/0")]
    with pytest.raises(FileNotFoundError):
        load_requests(str(tmp_path), index, {"b"})


def test_a_marker_without_an_index_is_indexed_from_its_files(tmp_path):
    _run(tmp_path)
    want = load_index(str(tmp_path))
    for m in (tmp_path / "_commits").glob("shard-*.json"):
        data = json.loads(m.read_text())
        assert len(data["index"]["request_id"]) == data["rows"]
        m.write_text(json.dumps({k: v for k, v in data.items() if k != "index"}))
    got = load_index(str(tmp_path))
    assert (got.errors, got.shards_of, got.next_attempt) == (want.errors, want.shards_of, want.next_attempt)


def test_a_damaged_index_is_refused(tmp_path):
    out, keys = _run(tmp_path)
    marker = _marker(tmp_path, keys["second"])
    m = json.loads(marker.read_text())
    marker.write_text(json.dumps({**m, "rows": 3}))
    with pytest.raises(RunStateError, match=f"shard {keys['second']} is damaged: marker says 3 rows, its index"):
        load_index(str(tmp_path))
    marker.write_text(json.dumps(m))
    commit_shard(out, [_row("e", 0, 2)])  # a request committed without all its chunks
    with pytest.raises(RunStateError, match="lack some chunks"):
        load_index(str(tmp_path))


def test_committed_request_ids_are_computed_once(tmp_path):
    _run(tmp_path)
    got = load_committed(str(tmp_path))
    assert got.request_ids is got.request_ids
    assert isinstance(commit.Committed.__dict__["request_ids"], commit.cached_property)


def test_groups_of_shards_give_the_rows_of_the_latest_attempts(tmp_path):
    """iter_committed: the same rows as load_committed, a request's chunks in one group, superseded rows left out."""
    _run(tmp_path)
    whole = load_committed(str(tmp_path)).rows
    for n in (1, 2, 100):
        groups = list(commit.iter_committed(str(tmp_path), n))
        got = sorted((r for g in groups for r in g), key=lambda r: (r["request_id"], r["chunk_index"]))
        assert got == whole
        for g in groups:  # b's two chunks of attempt 1 always together
            assert sum(r["request_id"] == "b" for r in g) in (0, 2)
    assert commit.committed_count(str(tmp_path)) == 4


def test_a_worker_commits_whole_requests_and_hands_back_split_ones(tmp_path):
    """commit_batch: complete requests of the batch become one shard (its marker indexes them) and come back
    as tally rows with the shard's key (a row per model, failing stage and first chunk or not, with
    how many rows it stands for); a request missing a chunk comes back whole for the driver."""
    from evalcore.reports.console import StageTally
    from evalcore.pipeline.stages import JUDGED, _table

    rows = [_row("a"), _row("b", 0, 2), _row("b", 1, 2, "timeout", "model", "transient"), _row("c", 0, 2)]
    out = commit.commit_batch(_table(rows, JUDGED), str(tmp_path), attempt=0)
    back = out.to_pylist()
    tally = [r for r in back if r["shard"] is not None]
    assert sorted((r["chunk_index"], r["error_stage"], r["rows"]) for r in tally) == [
        (0, None, 2), (1, "model", 1)]  # a and b's first chunk; b's second chunk, failed in its model
    assert {(r["model"], r["request_id"], r["text"]) for r in tally} == {("m", None, None)}
    assert [(r["request_id"], r["chunk_index"], r["shard"], r["rows"], r["text"]) for r in back[len(tally):]] == [
        ("c", 0, None, None, "c/0")]  # a request missing a chunk comes back whole
    tally_of = StageTally()
    tally_of.add(out)  # the driver's counts see every row, committed or not
    assert (tally_of.rows, tally_of.requests, dict(tally_of.by_model), dict(tally_of.errored)) == (
        4, 3, {"m": 4}, {("model", "m"): 1})
    assert commit.committed_count(str(tmp_path)) == 2
    assert load_index(str(tmp_path)).errors == {"a": set(), "b": {"transient"}}
    writer = commit.ShardWriter(storage.RunStorage(str(tmp_path)))
    writer.add_stream(out)
    assert writer.rows_committed == 3 and writer.shards == [tally[0]["shard"]]
    alone = commit.commit_batch(_table([_row("d", 0, 2)], JUDGED), str(tmp_path), attempt=0)  # nothing complete
    assert alone.select(["request_id", "shard", "rows"]).to_pylist() == [{"request_id": "d", "shard": None,
                                                                          "rows": None}]
    writer.add([{**_row("c", 1, 2)}])
    writer.close()
    assert {r["request_id"] for r in load_committed(str(tmp_path)).rows} == {"a", "b", "c"}
