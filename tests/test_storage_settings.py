"""The storage settings travel as one frozen object applied in a scope (``with storage.using(settings):``), never
set process-wide: a scope's settings reach the calls inside it (threads it starts too) and end with it, scopes
of two threads open at once each reach their own endpoint and do not restore each other's, and a Ray stage's
decorator applies the settings it is passed. The S3 round trips themselves are tests/test_s3_storage.py's (a real
SeaweedFS)."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from evalcore.core import storage
from evalcore.runconfig.config import StorageConfig


def _s(endpoint: str, timeout: float = 300.0) -> storage.StorageSettings:
    return storage.StorageSettings(storage.S3Options(endpoint_override=endpoint), timeout)


def test_a_scope_applies_its_settings_inside_and_ends_with_them() -> None:
    before = storage.current()
    with storage.using(_s("http://a:1", 5.0)) as a:
        assert storage.current() == a
        with storage.using(_s("http://b:2")):
            assert storage.current().s3.endpoint_override == "http://b:2"
        assert storage.current() == a
        with storage.using(None):  # None: as they are
            assert storage.current() == a
        seen = []
        t = threading.Thread(target=lambda: seen.append(storage.current()))
        t.start()
        t.join()
        assert seen == [a]  # a thread started inside (a read's deadline thread) reaches storage as the scope does
    assert storage.current() == before


def _endpoint(uri: str) -> str:
    """The endpoint (host:port) of the S3 filesystem a storage call on ``uri`` would use now."""
    fs, _ = storage.resolve(uri)
    return fs.__reduce__()[1][0]["endpoint_override"]  # pyarrow's own pickled arguments


def test_scopes_of_two_threads_at_once_each_reach_their_own_endpoint(monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")  # no credential lookup (IMDS) while the filesystems are built
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    outer = storage.current()  # DEFAULT, or an S3 fixture's scope
    both_open = threading.Barrier(2, timeout=10)  # also: both scopes ended
    seen: dict[str, list] = {}

    def worker(name: str, settings: storage.StorageSettings, leave_first: bool) -> None:
        with storage.using(settings):
            both_open.wait()  # the two scopes are open at the same time here
            seen[name] = [_endpoint("s3://bucket/x"), storage.current().read_timeout_s]
            both_open.wait()
            if not leave_first:
                time.sleep(0.05)  # the other scope ends first: this one's settings stay
                seen[name].append(_endpoint("s3://bucket/x"))
        both_open.wait()  # both scopes ended
        seen[name].append(storage.current())

    threads = [threading.Thread(target=worker, args=("a", _s("http://a:1", 5.0), True)),
               threading.Thread(target=worker, args=("b", _s("http://b:2", 7.0), False))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
    finally:
        storage.forget_clients()
    assert seen["a"] == ["a:1", 5.0, outer]
    assert seen["b"] == ["b:2", 7.0, "b:2", outer]
    assert storage.current() == outer


def test_a_helper_thread_of_a_scope_uses_it_and_carried_binds_it() -> None:
    a, b = _s("http://a:1"), _s("http://b:2")
    got = []
    with storage.using(a):
        task = storage.carried(lambda: storage.current())
    with storage.using(b):
        t = threading.Thread(target=lambda: got.extend([storage.current(), task()]))
        t.start()
        t.join(10)
    assert got == [b, a]  # a plain helper thread: the scope open in the process; a carried function: its own


def test_settings_from_parts_inherit_what_is_not_given_and_carry_no_keys(monkeypatch) -> None:
    for var in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)  # a config's null endpoint and region would take them
    with storage.using(_s("http://a:1", 7.0)):
        assert storage.StorageSettings.of() == _s("http://a:1", 7.0)
        assert storage.StorageSettings.of({"endpoint_override": "http://c:3"}) == _s("http://c:3", 7.0)
        assert storage.StorageSettings.of(None, 2.0).read_timeout_s == 2.0
    assert {f.name for f in dataclasses.fields(storage.S3Options)} == {"endpoint_override", "region", "scheme"}
    cfg = StorageConfig(s3={"endpoint_override": "http://d:4", "scheme": "http"}, read_timeout_s=9)
    assert cfg.settings() == storage.StorageSettings(storage.S3Options("http://d:4", None, "http"), 9.0)
    with pytest.raises(ValueError, match="read timeout must be positive"):
        storage.StorageSettings(storage.S3Options(), 0)


def test_a_stage_decorated_with_its_settings_reads_with_them() -> None:
    @storage.scoped(lambda batch, s3=None, read_timeout_s=None: storage.StorageSettings.of(s3, read_timeout_s))
    def stage(batch: int, s3: dict | None = None, read_timeout_s: float | None = None) -> storage.StorageSettings:
        return storage.current()

    outer = storage.current()
    got = stage(1, s3={"endpoint_override": "http://e:5", "region": "eu-west-1"}, read_timeout_s=3.0)
    assert got == storage.StorageSettings(storage.S3Options("http://e:5", "eu-west-1"), 3.0)
    assert stage(2) == storage.current() == outer and stage.__name__ == "stage"
