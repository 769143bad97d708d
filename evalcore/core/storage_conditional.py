"""Conditional writes, the part of the storage layer that leases and ledgers need: create-if-absent and
compare-and-swap, on S3 and on a local filesystem.

* **S3** (through boto3, the same endpoint, region and credential chain as :mod:`evalcore.core.storage`):
  create is ``PutObject`` with ``If-None-Match: *``; compare-and-swap is ``PutObject`` with ``If-Match``
  on the ETag read. The server refuses a lost race with 412 (or 409 while a competing write is in flight).
* **Local**: create publishes a fully written temp file with ``link(2)``, which fails when the name exists
  (``O_CREAT | O_EXCL`` semantics, without ever showing a half-written file); compare-and-swap holds an
  exclusive ``flock`` on a sidecar lock file while it compares the content's SHA-256 (the local "ETag")
  and renames the new content into place. A killed writer's ``flock`` is released by the kernel.

:func:`probe` tells at start whether a store honours the conditions (an S3-compatible server that ignores
``If-None-Match`` would let two writers both "create" the same object).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import uuid
from dataclasses import dataclass

from evalcore.core import storage


@dataclass(frozen=True)
class Versioned:
    """An object's bytes and its version (S3 ETag; local: SHA-256 of the bytes)."""

    data: bytes
    version: str


# ----------------------------------------------------------------------------- S3 (boto3)


def _client(settings: storage.StorageSettings):
    return storage.s3_client(settings)


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://"):].partition("/")
    return bucket, key


def _lost(e: Exception) -> bool:
    """A refused condition (412) or a concurrent conditional write in flight (409): the race was lost."""
    resp = getattr(e, "response", None) or {}
    code = str(resp.get("Error", {}).get("Code", ""))
    status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict")


def _missing(e: Exception) -> bool:
    resp = getattr(e, "response", None) or {}
    return str(resp.get("Error", {}).get("Code", "")) in ("NoSuchKey", "404", "NotFound")


def _s3_put(uri: str, data: bytes, **condition: str) -> str | None:
    from botocore.exceptions import ClientError

    bucket, key = _split(uri)
    try:
        resp = _client(storage.current()).put_object(Bucket=bucket, Key=key, Body=data, **condition)
    except ClientError as e:
        if _lost(e) or ("IfMatch" in condition and _missing(e)):
            return None
        raise OSError(f"conditional write of {uri} failed: {e}") from None
    return str(resp["ETag"])


def _s3_read(uri: str) -> Versioned | None:
    from botocore.exceptions import ClientError

    bucket, key = _split(uri)
    try:
        resp = _client(storage.current()).get_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if _missing(e):
            return None
        raise OSError(f"read of {uri} failed: {e}") from None
    return Versioned(resp["Body"].read(), str(resp["ETag"]))


# ----------------------------------------------------------------------------- local files


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tmp(path: str) -> str:
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")


def _local_create(path: str, data: bytes) -> str | None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = _tmp(path)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, path)  # atomic; EEXIST when another writer got there first
    except FileExistsError:
        return None
    finally:
        os.unlink(tmp)
    return _sha(data)


def _local_read(path: str) -> Versioned | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return Versioned(data, _sha(data))


def _local_replace(path: str, data: bytes, version: str) -> str | None:
    lock = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.lock")
    with open(lock, "a+b") as lf:
        fcntl.flock(lf.fileno(), fcntl.LOCK_EX)
        try:
            cur = _local_read(path)
            if cur is None or cur.version != version:
                return None
            tmp = _tmp(path)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            fcntl.flock(lf.fileno(), fcntl.LOCK_UN)
    return _sha(data)


# ----------------------------------------------------------------------------- the interface


def read(uri: str) -> Versioned | None:
    """The object's bytes and version, or None when it does not exist."""
    if storage.is_s3(uri):
        return _s3_read(uri)
    return _local_read(storage.resolve(uri)[1])


def create(uri: str, data: bytes) -> str | None:
    """Write ``data`` only if ``uri`` does not exist; its new version, or None when it existed."""
    if storage.is_s3(uri):
        return _s3_put(uri, data, IfNoneMatch="*")
    return _local_create(storage.resolve(uri)[1], data)


def replace(uri: str, data: bytes, version: str) -> str | None:
    """Write ``data`` only if ``uri`` still has ``version``; its new version, or None when it changed."""
    if storage.is_s3(uri):
        return _s3_put(uri, data, IfMatch=version)
    return _local_replace(storage.resolve(uri)[1], data, version)


def probe(root: str) -> str | None:
    """None when the store under ``root`` honours create-if-absent and compare-and-swap; else why not (one
    line). Writes and removes one small object under ``root``."""
    uri = storage.join(root, f".conditional-probe-{uuid.uuid4().hex}")
    try:
        first = create(uri, b"1")
        if first is None:
            return "a create-if-absent of a new object was refused"
        if create(uri, b"2") is not None:
            return "the store ignored If-None-Match (a second create of one object succeeded)"
        if replace(uri, b"3", '"not-the-etag"' if storage.is_s3(uri) else "0" * 64) is not None:
            return "the store ignored If-Match (a compare-and-swap on a wrong version succeeded)"
        if replace(uri, b"4", first) is None:
            return "a compare-and-swap on the current version was refused"
        return None
    except (OSError, NotImplementedError) as e:
        return f"conditional writes failed: {type(e).__name__}: {str(e)[:200]}"
    finally:
        try:
            storage.delete(uri)
            if not storage.is_s3(uri):
                lock = storage.resolve(uri)[1]
                os.unlink(os.path.join(os.path.dirname(lock), f".{os.path.basename(lock)}.lock"))
        except OSError:
            pass
