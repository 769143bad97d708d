"""Model checkpoints: a local directory or an ``s3://`` prefix, resolved to a local directory, and
their identity (where they came from plus a content hash or a given revision).

An ``s3://`` prefix is copied once per process into a local cache directory (``cache_dir``, else
``$EVALCORE_CHECKPOINT_CACHE``, else ``<tmp>/evalcore-checkpoints``): into a temporary directory
first, renamed into place only when complete, so a reader never sees half a checkpoint. The cache
directory's name depends on the prefix *and* its listing (names, sizes, modification times), so a
checkpoint rewritten under the same prefix is copied again instead of being served stale (a rewrite
that keeps every file's size within the same second of modification time is not detected: S3 listings
give no content hash; give each checkpoint its own prefix, or a ``revision``).

The identity ``{"uri", "sha256", "revision"}`` goes into every backend's ``info()`` and so into
the ``model_info`` of every response row: the nightly job compares checkpoints by it. ``sha256``
covers every file's relative path and bytes (sorted by path); it is skipped when a ``revision`` is
given (then that string is the identity).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import threading
import uuid
from dataclasses import dataclass

import pyarrow.fs as pafs

from evalcore.core import storage

CACHE_ENV = "EVALCORE_CHECKPOINT_CACHE"
_HASH_BLOCK = 1 << 20


class CheckpointError(ValueError):
    """A checkpoint that cannot be found or read."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint resolved to ``local_dir`` (identical to ``uri`` for a local checkpoint)."""

    uri: str
    local_dir: str
    sha256: str | None
    revision: str | None

    def identity(self) -> dict[str, str | None]:
        """What every response records about the checkpoint."""
        return {"uri": self.uri, "sha256": self.sha256, "revision": self.revision}


def default_cache_dir() -> str:
    return os.environ.get(CACHE_ENV) or os.path.join(tempfile.gettempdir(), "evalcore-checkpoints")


def content_sha256(local_dir: str) -> str:
    """sha256 over every file under ``local_dir``: relative POSIX path, NUL, size, NUL, bytes; sorted by path."""
    h = hashlib.sha256()
    for rel in _local_files(local_dir):
        path = os.path.join(local_dir, rel)
        h.update(rel.encode("utf-8") + b"\0" + str(os.path.getsize(path)).encode() + b"\0")
        with open(path, "rb") as f:
            while block := f.read(_HASH_BLOCK):
                h.update(block)
    return h.hexdigest()


def _local_files(local_dir: str) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(local_dir):
        dirnames.sort()
        for name in filenames:
            out.append(os.path.relpath(os.path.join(dirpath, name), local_dir).replace(os.sep, "/"))
    return sorted(out)


def _s3_listing(uri: str) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime in ns) of every object under the prefix ``uri``."""
    fs, path = storage.resolve(uri)
    path = path.rstrip("/")
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except OSError as e:
        raise CheckpointError(f"checkpoint {uri}: cannot list it: {e}") from None
    out = []
    for i in infos:
        if i.type == pafs.FileType.File:
            mtime = i.mtime_ns if i.mtime_ns is not None else 0
            out.append((i.path[len(path) + 1:], int(i.size or 0), int(mtime)))
    if not out:
        raise CheckpointError(f"checkpoint {uri}: no files under this prefix")
    return sorted(out)


_lock = threading.Lock()
_resolved: dict[tuple[str, str | None, str], Checkpoint] = {}


def resolve_checkpoint(uri: str, revision: str | None = None, cache_dir: str | None = None) -> Checkpoint:
    """The checkpoint at ``uri`` (local directory or ``s3://`` prefix) as a local directory plus its
    identity; resolved once per process (an s3 prefix is copied at most once per process)."""
    if not isinstance(uri, str) or not uri:
        raise CheckpointError("checkpoint: expected a local directory or an s3:// prefix")
    cache_dir = os.path.abspath(os.path.expanduser(cache_dir or default_cache_dir()))
    key = (uri, revision, cache_dir)
    with _lock:
        if key not in _resolved:
            _resolved[key] = _resolve(uri, revision, cache_dir)
        return _resolved[key]


def _resolve(uri: str, revision: str | None, cache_dir: str) -> Checkpoint:
    if not storage.is_s3(uri):
        local = os.path.abspath(os.path.expanduser(uri[len("file://"):] if uri.startswith("file://") else uri))
        if not os.path.isdir(local):
            raise CheckpointError(f"checkpoint {uri}: not a directory")
        return Checkpoint(uri, local, None if revision else content_sha256(local), revision)
    listing = _s3_listing(uri)
    name = hashlib.sha256(json.dumps([uri.rstrip("/"), listing]).encode()).hexdigest()[:24]
    final = os.path.join(cache_dir, name)
    meta = final + ".json"  # next to the copy, so it is not part of the hashed files
    if not os.path.isdir(final):
        _copy_prefix(uri, listing, final)
    if revision:
        return Checkpoint(uri, final, None, revision)
    try:
        with open(meta, encoding="utf-8") as f:
            digest = json.load(f)["sha256"]
    except (OSError, ValueError, KeyError):
        digest = content_sha256(final)  # the copy never changes after its rename: hash once per cache entry
        tmp = f"{meta}.tmp-{uuid.uuid4().hex}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"uri": uri, "sha256": digest}, f)
        os.replace(tmp, meta)
    return Checkpoint(uri, final, digest, revision)


def _copy_prefix(uri: str, listing: list[tuple[str, int, int]], final: str) -> None:
    """Copy every object under ``uri`` into a temporary directory, then rename it to ``final``."""
    os.makedirs(os.path.dirname(final), exist_ok=True)
    tmp = f"{final}.tmp-{uuid.uuid4().hex}"
    fs, prefix = storage.resolve(uri)
    prefix = prefix.rstrip("/")
    try:
        for rel, _, _ in listing:
            if rel.startswith("/") or any(p in ("", ".", "..") for p in rel.split("/")):
                raise CheckpointError(f"checkpoint {uri}: refusing object key {rel!r}")
            dest = os.path.join(tmp, *rel.split("/"))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with fs.open_input_stream(f"{prefix}/{rel}") as src, open(dest, "wb") as out:
                while block := src.read(_HASH_BLOCK):
                    out.write(block)
        try:
            os.rename(tmp, final)
        except OSError:
            if not os.path.isdir(final):  # not a lost race with another process: a real failure
                raise
    except OSError as e:
        raise CheckpointError(f"checkpoint {uri}: copy failed: {e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def read_checkpoint_json(uri: str, name: str) -> dict | None:
    """One JSON file of a checkpoint (local or s3) without copying the rest; None if it is absent."""
    path = storage.join(uri, name) if storage.is_s3(uri) else os.path.join(os.path.expanduser(uri), name)
    try:
        data = json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        return None
    except OSError as e:
        if "NoSuchKey" in str(e) or "does not exist" in str(e).lower():
            return None
        raise CheckpointError(f"checkpoint {uri}: cannot read {name}: {e}") from None
    except ValueError as e:
        raise CheckpointError(f"checkpoint {uri}: {name} is not valid JSON: {e}") from None
    return data if isinstance(data, dict) else None
