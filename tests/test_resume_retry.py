"""Committed error rows that a resumed run retries: the latest attempt's rows win, nothing is rewritten."""

from __future__ import annotations

import pytest

from evalcore.core import storage
from evalcore.core.errors import parse_classes
from evalcore.pipeline.commit import RunStateError, commit_shard, load_committed
from evalcore.pipeline.resume import rejudged_rows, retried_requests


def _row(rid: str, error: str | None = None, stage: str | None = None, cls: str | None = None, chunk: int = 0,
         n: int = 1, text: str | None = "answer") -> dict:
    return {"request_id": rid, "chunk_index": chunk, "n_chunks": n, "dataset": "d", "item_id": rid,
            "protocol": "mcq", "model": "m", "condition": "correct", "variant": "v", "option_order": 0,
            "text": text, "error": error, "error_stage": stage, "error_class": cls,
            "judge": "mcq_llm@1" if stage == "judge" else None}


def test_a_later_attempt_supersedes_a_request_and_keeps_the_rest(tmp_path) -> None:
    out = storage.RunStorage(str(tmp_path))
    commit_shard(out, [_row("a"), _row("b", "connection error: refused", "judge", "transient")])
    first = load_committed(str(tmp_path))
    assert first.next_attempt == 1 and first.superseded == 0 and len(first.rows) == 2
    commit_shard(out, [_row("b")], attempt=1)
    again = load_committed(str(tmp_path))
    assert {r["request_id"]: r["error"] for r in again.rows} == {"a": None, "b": None}
    assert again.superseded == 1 and again.next_attempt == 2
    commit_shard(out, [_row("b")], attempt=1)  # the same request twice in one attempt: a damaged run
    commit_shard(out, [_row("b"), _row("c")], attempt=1)
    with pytest.raises(RunStateError, match="committed twice"):
        load_committed(str(tmp_path))


def test_a_stored_reason_is_bounded_at_commit(tmp_path) -> None:
    out = storage.RunStorage(str(tmp_path))
    commit_shard(out, [_row("a", "HTTP 500: " + "UklGR" * 100_000 + "\n end", "model", "input")])
    (row,) = load_committed(str(tmp_path)).rows
    assert len(row["error"]) < 200 and "\n" not in row["error"] and "chars elided" in row["error"]


def test_which_rows_a_resume_retries_and_which_are_only_judged_again() -> None:
    rows = [_row("ok"), _row("conn", "connection error", "judge", "transient"),
            _row("bad", "HTTP 400: no", "judge", "input"),
            _row("down", "endpoint: connection error", "model", "transient", text=None),
            _row("lost", "lost: no row came back", "pipeline", None),  # the stage's class: transient
            _row("chunked", "connection error", "judge", "transient", chunk=0, n=2),
            _row("chunked", None, None, None, chunk=1, n=2)]
    retried = retried_requests(rows, set(parse_classes("transient")))
    assert sorted(retried) == ["chunked", "conn", "down", "lost"]
    again = rejudged_rows(retried)
    assert sorted({r["request_id"] for r in again}) == ["chunked", "conn"]  # the model answered: judge again
    assert all(r["error"] is None and r["judge"] is None and r["text"] == "answer" for r in again)
    assert len([r for r in again if r["request_id"] == "chunked"]) == 2  # every chunk
    assert sorted(retried_requests(rows, {"transient", "input"})) == ["bad", "chunked", "conn", "down", "lost"]
    assert retried_requests(rows, set()) == {}
    with pytest.raises(ValueError, match="unknown error class"):
        parse_classes("transient,flaky")
