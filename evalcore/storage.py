"""One storage layer over ``pyarrow.fs`` for local paths and ``s3://`` URIs.

S3 settings (endpoint override for S3-compatible servers, region, scheme) come from
the run config or the standard AWS environment variables; credentials only ever
come from the environment / AWS credential chain, never from config files.
"""

from __future__ import annotations

import io
import os
import posixpath
import uuid
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


@dataclass(frozen=True)
class S3Options:
    endpoint_override: str | None = None
    region: str | None = None
    scheme: str | None = None  # "http" for a local S3-compatible server


_S3 = S3Options(
    endpoint_override=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
    region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"),
)


def configure_s3(options: S3Options) -> None:
    """Set process-wide S3 options (called from the run config, and in each Ray task that reads S3,
    since a worker process does not see the driver's settings). Cheap when nothing changes."""
    global _S3
    if options == _S3:
        return
    _S3 = options
    _s3_filesystem.cache_clear()


def s3_options() -> S3Options:
    return _S3


@lru_cache(maxsize=4)
def _s3_filesystem(options: S3Options) -> pafs.S3FileSystem:
    # No keys are passed: pyarrow's S3 client takes them from the standard AWS chain
    # (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE, instance roles).
    kwargs: dict = {}
    endpoint = options.endpoint_override
    if endpoint:
        scheme = options.scheme
        if "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
        kwargs["endpoint_override"] = endpoint
        kwargs["scheme"] = scheme or "https"
        kwargs["force_virtual_addressing"] = False  # path-style: http://host:port/bucket/key
    if options.region:
        kwargs["region"] = options.region
    return pafs.S3FileSystem(**kwargs)


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """``uri`` → (filesystem, path inside it)."""
    if is_s3(uri):
        return _s3_filesystem(_S3), uri[len("s3://") :]
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(uri))


def join(root: str, *parts: str) -> str:
    """Join path parts onto a local path or URI."""
    if is_s3(root):
        return "s3://" + posixpath.join(root[len("s3://") :], *parts)
    return os.path.join(root, *parts)


def read_bytes(uri: str) -> bytes:
    fs, path = resolve(uri)
    with fs.open_input_stream(path) as f:
        return f.read()


def exists(uri: str) -> bool:
    fs, path = resolve(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def makedirs(uri: str) -> None:
    fs, path = resolve(uri)
    fs.create_dir(path, recursive=True)


def write_bytes(uri: str, data: bytes) -> None:
    """Write ``data`` to ``uri`` atomically where the store allows (local: temp file + rename)."""
    fs, path = resolve(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # a hidden name: readers of the directory (pyarrow skips "." and "_" names) never see a half-written file
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
        with fs.open_output_stream(tmp) as f:
            f.write(data)
        os.replace(tmp, path)
    else:  # an S3 PUT is atomic per object; object stores have no directories to create
        with fs.open_output_stream(path) as f:
            f.write(data)


def write_text(uri: str, text: str) -> None:
    write_bytes(uri, text.encode("utf-8"))


def read_text(uri: str) -> str:
    return read_bytes(uri).decode("utf-8")


def write_parquet(table: pa.Table, uri: str) -> None:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    write_bytes(uri, buf.getvalue())


def read_parquet(uri: str) -> pa.Table:
    """Read one Parquet file or a directory of them."""
    fs, path = resolve(uri)
    return pq.read_table(path, filesystem=fs)


def delete(uri: str) -> bool:
    """Delete one file/object; False if it did not exist."""
    fs, path = resolve(uri)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        return False
    return True


def list_files(uri: str, suffix: str = "") -> list[str]:
    fs, path = resolve(uri)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    prefix = "s3://" if is_s3(uri) else ""
    return sorted(prefix + i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(suffix))


# ----------------------------------------------------------------------------- confinement


def _normal(uri: str) -> tuple[str, str] | None:
    """(store, normalised path) of ``uri``, or None when it cannot be trusted (``..``/``.`` in an S3 key).

    Local paths are made absolute with symlinks resolved; S3 keys are taken literally, so a key with
    ``.``/``..`` segments (which some clients and servers normalise and others do not) is refused.
    """
    if is_s3(uri):
        path = uri[len("s3://"):]
        parts = path.split("/")
        if not parts[0] or any(p in (".", "..") for p in parts):
            return None
        return "s3", path.rstrip("/")
    if "://" in uri and not uri.startswith("file://"):
        return None  # an unknown scheme is never inside anything
    if uri.startswith("file://"):
        uri = uri[len("file://"):]
    return "file", os.path.realpath(os.path.expanduser(uri))


def within(uri: str, root: str) -> bool:
    """Whether ``uri`` is ``root`` itself or lies under it (same store, whole path segments)."""
    u, r = _normal(uri), _normal(root)
    if u is None or r is None or u[0] != r[0]:
        return False
    sep = "/" if u[0] == "s3" else os.sep
    return u[1] == r[1] or u[1].startswith(r[1].rstrip(sep) + sep)


def within_any(uri: str, roots: list[str] | None) -> bool:
    """``roots`` None = no restriction; else ``uri`` must lie under one of them."""
    return roots is None or any(within(uri, r) for r in roots)


class OutsideRoot(PermissionError):
    """A write outside the run's root was refused."""


class RunStorage:
    """The writes of one run, confined to its root: a path outside it raises :class:`OutsideRoot`."""

    def __init__(self, root: str) -> None:
        self.root = root

    def check(self, uri: str) -> str:
        if not within(uri, self.root):
            raise OutsideRoot(f"refusing to write {uri!r}: outside the run root {self.root!r}")
        return uri

    def makedirs(self, uri: str) -> None:
        makedirs(self.check(uri))

    def write_bytes(self, uri: str, data: bytes) -> None:
        write_bytes(self.check(uri), data)

    def write_text(self, uri: str, text: str) -> None:
        write_text(self.check(uri), text)

    def write_parquet(self, table: pa.Table, uri: str) -> None:
        write_parquet(table, self.check(uri))

    def delete(self, uri: str) -> bool:
        return delete(self.check(uri))
