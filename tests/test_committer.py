"""The commit stage's grouping (evalcore.pipeline.committer), without Ray: the first block is committed at once, then
a group once it holds shard_rows rows or every_s seconds passed; at most in_flight commits run; every row is handed
to exactly one commit; and the stage's figures, and the profile's stage names for Ray Data's operators."""

from __future__ import annotations

import time

import pyarrow as pa

from evalcore.pipeline import commit
from evalcore.pipeline.committer import Committer
from evalcore.pipeline.profile import stage_name
from evalcore.pipeline.raydata import Bundle


def _answer(rows: int) -> pa.Table:
    """A commit's answer: one tally row standing for ``rows`` committed rows."""
    return pa.table({commit.SHARD_COLUMN: ["k"], commit.ROWS_COLUMN: pa.array([rows], pa.int64())})


def _committer(times: list[float], in_flight: int = 2):
    clock = iter(times)
    started: list[list[str]] = []
    running: list[int] = []
    most = [0]

    def submit(ranges, refs):
        started.append(list(refs))
        running.append(len(started) - 1)
        most[0] = max(most[0], len(running))
        return len(started) - 1

    def wait(refs, block):
        done = refs[:1] if block else []  # a commit ends only when waited for: the cap is what holds them back
        for r in done:
            running.remove(r)
        return done

    def get(ref):
        return _answer(sum(int(x.split(":")[1]) for x in started[ref])), 0.5, time.time()

    c = Committer("root", shard_rows=100, every_s=10.0, in_flight=in_flight, clock=lambda: next(clock),
                  submit=submit, wait=wait, get=get)
    return c, started, most


def _bundles(sizes: list[int]) -> list[Bundle]:
    return [Bundle([f"b{i}:{n}"], [None], n) for i, n in enumerate(sizes)]


def test_the_first_block_is_committed_at_once_then_by_rows_or_seconds():
    # clock read after each block: 0 (first: committed), 1, 2, 3 (120 rows: committed), 20 (10 s since: committed), 21
    c, started, most = _committer([0.0, 1.0, 2.0, 3.0, 20.0, 21.0, 22.0])
    out = list(c.run(_bundles([30, 40, 40, 40, 10, 5])))
    assert started == [["b0:30"], ["b1:40", "b2:40", "b3:40"], ["b4:10"], ["b5:5"]]
    assert sum(t.column(commit.ROWS_COLUMN)[0].as_py() for t in out) == 165  # every row handed on once
    assert most[0] <= 2
    assert (c.stage.rows_in, c.stage.tasks, c.stage.shards, c.stage.busy_s) == (165, 4, 4, 2.0)
    assert c.stage.started is not None and c.stage.first_done is not None


def test_no_more_than_in_flight_commits_run_at_once():
    c, started, most = _committer([float(10 * i) for i in range(20)], in_flight=1)
    list(c.run(_bundles([5] * 8)))  # 10 s between blocks: each is its own commit
    assert len(started) == 8 and most[0] == 1


def test_ray_data_operators_map_to_the_profile_stages():
    assert [stage_name(n) for n in ("Readrequests", "StreamingRepartition[num_rows_per_block=256,strict=True]",
                                    "MapBatches(decode)", "MapBatches(model:listener)",
                                    "MapBatches(judge)->MapBatches(score)", "MapBatches(Scoring)",
                                    "MapBatches(ModelScoring)", "Union")] \
        == ["read", "align", "decode", "model:listener", "judge+metrics", "metrics", "metrics:models", None]
