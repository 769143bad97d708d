"""One storage layer over ``pyarrow.fs`` for local paths and ``s3://`` URIs.

How storage is reached is one frozen :class:`StorageSettings`: the S3 connection options (endpoint override for
S3-compatible servers, region, scheme) and the deadline of one read. Outside any scope they come from the standard
AWS environment variables (and 300 s); a run or a nightly builds them from its config
(``StorageConfig.settings()``) and applies them to the calls made inside ``with storage.using(settings):`` — the
driver around its work, each Ray worker stage around its own (a worker process does not see the driver's), e.g.
with the :func:`scoped` decorator. The settings before come back when the scope ends. Scopes are kept per thread
(a ``ContextVar``): two threads in scopes of their own at once each reach storage with their own; a thread that
opened none (a run's helper threads) uses the innermost scope open in the process, or one handed to it with
:func:`carried`. Credentials only ever come from the environment / AWS credential chain, never from config files
or settings.

Reads never hang and never open what is not a file: a local path is ``stat``-ed before any open and
only a regular file is read (a FIFO, device, socket or directory raises :class:`NotAFile`); every read
has a deadline (the settings' ``read_timeout_s``, the run's ``storage.read_timeout_s``), after which it raises
:class:`ReadTimeout` (S3 requests also stop after that long without progress). :func:`is_transient` tells
failures of the world (timeouts, unreachable or overloaded servers) from bad inputs.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import io
import os
import posixpath
import re
import stat
import threading
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from typing import Any, Callable, Iterator, Mapping, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


@dataclass(frozen=True)
class S3Options:
    endpoint_override: str | None = None
    region: str | None = None
    scheme: str | None = None  # "http" for a local S3-compatible server

    @classmethod
    def from_env(cls) -> S3Options:
        """The standard AWS variables' endpoint and region (``AWS_ENDPOINT_URL_S3``, ``AWS_REGION`` …)."""
        return cls(endpoint_override=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
                   region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))


#: seconds one read may take, by default (a run sets its ``storage.read_timeout_s``)
READ_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class StorageSettings:
    """How this process reaches storage: the S3 connection options (never keys) and the deadline of one read."""

    s3: S3Options = field(default_factory=S3Options)
    read_timeout_s: float = READ_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.read_timeout_s <= 0:
            raise ValueError(f"read timeout must be positive, got {self.read_timeout_s}")

    @classmethod
    def of(cls, s3: Mapping[str, Any] | S3Options | None = None, read_timeout_s: float | None = None,
           ) -> StorageSettings:
        """Settings from their parts as a Ray stage receives them (``s3``: :class:`S3Options` fields, e.g. a config's
        ``storage.s3.model_dump()``); a part given as None is the current one (:func:`current`)."""
        now = current()
        if s3 is not None and not isinstance(s3, S3Options):
            s3 = S3Options(**s3)
        timeout = now.read_timeout_s if read_timeout_s is None else float(read_timeout_s)
        return cls(now.s3 if s3 is None else s3, timeout)


#: outside any scope: the environment's S3 options, the default deadline
DEFAULT = StorageSettings(S3Options.from_env(), READ_TIMEOUT_S)
_Scope = tuple[object, StorageSettings]  # (the scope's own token, its settings)
#: the scopes this thread (this context) opened, innermost last
_mine: ContextVar[tuple[_Scope, ...]] = ContextVar("evalcore_storage_scopes", default=())
#: every scope open in this process, innermost last: what a thread that opened none of its own reaches storage with
#: (a run's helper threads: its clip writers, its lease renewals). A scope that ends removes its own entry wherever
#: it is, so scopes opened and closed by different threads never restore each other's settings
_scopes: list[_Scope] = []
_scopes_lock = threading.Lock()
_F = TypeVar("_F", bound=Callable[..., Any])


def current() -> StorageSettings:
    """The settings storage calls use now: the innermost scope this thread opened, else the innermost open in the
    process (a helper thread of a scope), else :data:`DEFAULT`."""
    mine = _mine.get()
    if mine:
        return mine[-1][1]
    with _scopes_lock:
        return _scopes[-1][1] if _scopes else DEFAULT


@contextmanager
def using(settings: StorageSettings | None) -> Iterator[StorageSettings]:
    """Storage calls made inside the block reach S3 and time reads with ``settings`` (threads the block starts do
    too, unless they open a scope of their own); those before come back when it ends. None: the current ones,
    unchanged. Two threads in scopes of their own at once each use their own."""
    if settings is None:
        yield current()
        return
    scope = (object(), settings)
    _mine.set(_mine.get() + (scope,))
    with _scopes_lock:
        _scopes.append(scope)
    try:
        yield settings
    finally:
        _mine.set(tuple(s for s in _mine.get() if s[0] is not scope[0]))
        with _scopes_lock:
            _scopes[:] = [s for s in _scopes if s[0] is not scope[0]]


def scoped(settings_of: Callable[..., StorageSettings | None]) -> Callable[[_F], _F]:
    """A decorator: each call of the function runs inside ``using(settings_of(*args, **kwargs))`` (a run's or a
    nightly's entry point, from its config; a Ray stage's function or actor method, from the settings it is passed:
    a worker process does not see the driver's scope)."""
    def wrap(fn: _F) -> _F:
        @wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            with using(settings_of(*args, **kwargs)):
                return fn(*args, **kwargs)
        return call  # type: ignore[return-value]
    return wrap


def carried(fn: _F) -> _F:
    """``fn`` bound to the settings current now, for a thread or pool worker that runs it later (a scope of
    another thread may be the process's innermost by then)."""
    settings = current()

    @wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with using(settings):
            return fn(*args, **kwargs)
    return call  # type: ignore[return-value]


class NotAFile(OSError):
    """A local path that is a FIFO, device, socket or directory: refused before any open."""


class ReadTimeout(TimeoutError):
    """A read that did not finish within its deadline (the input may be fine: a transient failure)."""


# failures of the world, not of the input: pyarrow's S3 errors are OSErrors whose text names the AWS error
_TRANSIENT_TEXT = re.compile(r"NETWORK_CONNECTION|curlCode: (6|7|28|52|55|56)\b|SLOW_DOWN|SERVICE_UNAVAILABLE|"
                             r"INTERNAL_FAILURE|THROTTLING|REQUEST_TIMEOUT|Timeout was reached|HTTP response code: 5\d\d")
_TRANSIENT_ERRNO = {errno.ETIMEDOUT, errno.ECONNREFUSED, errno.ECONNRESET, errno.ECONNABORTED, errno.EHOSTUNREACH,
                    errno.ENETUNREACH, errno.EAGAIN, errno.EIO}


def is_transient(exc: BaseException) -> bool:
    """Whether a read failed because of the world (timeout, unreachable or overloaded server), not its input."""
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    if isinstance(exc, OSError) and not isinstance(exc, (FileNotFoundError, PermissionError, NotAFile)):
        return exc.errno in _TRANSIENT_ERRNO or bool(_TRANSIENT_TEXT.search(str(exc)))
    return False


@lru_cache(maxsize=4)
def _s3_filesystem(options: S3Options, timeout_s: float) -> pafs.S3FileSystem:
    # No keys are passed: pyarrow's S3 client takes them from the standard AWS chain
    # (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_PROFILE, instance roles).
    # request_timeout: a request that transfers nothing for that long fails (curl's low-speed limit)
    kwargs: dict = {"connect_timeout": timeout_s, "request_timeout": timeout_s}
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


def forget_clients() -> None:
    """Drop the cached S3 clients (pyarrow's and boto3's): the next call builds new ones, e.g. after the
    environment's credentials changed, or in a forked child (a client's connections are not the child's)."""
    _s3_filesystem.cache_clear()
    _boto3_client.cache_clear()


def is_s3(uri: str) -> bool:
    return uri.startswith("s3://")


def resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    """``uri`` → (filesystem, path inside it)."""
    if is_s3(uri):
        now = current()
        return _s3_filesystem(now.s3, now.read_timeout_s), uri[len("s3://") :]
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(uri))


def join(root: str, *parts: str) -> str:
    """Join path parts onto a local path or URI."""
    if is_s3(root):
        return "s3://" + posixpath.join(root[len("s3://") :], *parts)
    return os.path.join(root, *parts)


def parent(uri: str) -> str:
    """The directory (local) or prefix (``s3://``) holding ``uri``."""
    if is_s3(uri):
        return "s3://" + posixpath.dirname(uri[len("s3://"):].rstrip("/"))
    return os.path.dirname(uri.rstrip(os.sep)) or "."


def absolute(uri: str, base: str | None = None) -> str:
    """``uri`` as an absolute URI: ``s3://`` and other schemes unchanged, ``file://`` dropped, ``~`` expanded,
    and a relative path joined to ``base`` (a local directory or ``s3://`` prefix; default the working
    directory), with ``.``/``..`` segments resolved. Done once, on the driver, so that every worker reads the
    same file whatever its own working directory. ValueError when a relative path climbs above its bucket."""
    if uri.startswith("file://"):
        uri = uri[len("file://"):]
    if "://" in uri:
        return uri
    uri = os.path.expanduser(uri)
    if os.path.isabs(uri):
        return os.path.normpath(uri)
    base = absolute(base) if base is not None else os.getcwd()
    if not is_s3(base):
        return os.path.normpath(os.path.join(base, uri))
    key = posixpath.normpath(posixpath.join(base[len("s3://"):], uri))
    if key.startswith("../") or key in ("..", ".") or "/" not in key:
        raise ValueError(f"relative path {uri!r} leaves the bucket of {base!r}")
    return "s3://" + key


def _check_local(path: str) -> None:
    """Refuse a path that is not a regular file, from its ``stat`` (no open: a FIFO would block, a device
    could stream forever)."""
    mode = os.stat(path).st_mode  # FileNotFoundError / PermissionError as they are
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise NotAFile(f"{path} is {kind}, not a regular file")


def _read_local(path: str) -> bytes:
    _check_local(path)
    # O_NONBLOCK: should the path have become a FIFO since the stat, opening it cannot block; fstat checks again
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotAFile(f"{path} changed into something that is not a regular file")
        return f.read()


def _within_deadline(fn, timeout_s: float, what: str):
    """``fn()`` in a daemon thread, abandoned with :class:`ReadTimeout` after ``timeout_s`` (a hung read
    cannot be interrupted; its thread ends when the read does)."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=carried(target), name="evalcore-read", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise ReadTimeout(f"reading {what} did not finish within {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def read_bytes(uri: str, timeout_s: float | None = None) -> bytes:
    """The bytes at ``uri``: a regular local file or an S3 object, within ``timeout_s`` (default: the
    current settings' read deadline). Raises :class:`NotAFile` for FIFOs, devices, sockets and directories
    (before any open) and :class:`ReadTimeout` when the deadline passes."""
    fs, path = resolve(uri)
    timeout = current().read_timeout_s if timeout_s is None else timeout_s

    def read() -> bytes:
        if isinstance(fs, pafs.LocalFileSystem):
            return _read_local(path)
        with fs.open_input_stream(path) as f:
            return f.read()

    return _within_deadline(read, timeout, uri)


def exists(uri: str) -> bool:
    fs, path = resolve(uri)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def makedirs(uri: str) -> None:
    fs, path = resolve(uri)
    fs.create_dir(path, recursive=True)


def write_bytes(uri: str, data: bytes) -> None:
    """Write ``data`` to ``uri`` atomically: a reader sees the whole of it or nothing (local: a hidden temporary
    file renamed into place; S3: one ``PutObject`` carrying its body's MD5, which the server stores only whole)."""
    fs, path = resolve(uri)
    if isinstance(fs, pafs.LocalFileSystem):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # a hidden name: readers of the directory (pyarrow skips "." and "_" names) never see a half-written file
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
        with fs.open_output_stream(tmp) as f:
            f.write(data)
        os.replace(tmp, path)
    else:
        # Not pyarrow's output stream: it completes the upload when it is closed, by an exception or by the garbage
        # collector as much as by the end of the write, so a writer killed mid-write left a cut object (a 0-byte
        # commit marker, seen on a cluster whose driver exited while a commit task was in flight)
        bucket, _, key = path.partition("/")
        md5 = base64.b64encode(hashlib.md5(data).digest()).decode("ascii")
        with _as_os_errors(uri):
            s3_client().put_object(Bucket=bucket, Key=key, Body=data, ContentMD5=md5)


def upload_file(local_path: str, uri: str, chunk_bytes: int = 8 << 20) -> None:
    """Copy the local file ``local_path`` to ``uri`` a chunk at a time, atomically as :func:`write_bytes` (S3: a
    multipart upload that boto3 aborts when it fails, never completes cut)."""
    fs, path = resolve(uri)
    if not isinstance(fs, pafs.LocalFileSystem):
        from boto3.s3.transfer import TransferConfig

        bucket, _, key = path.partition("/")
        with _as_os_errors(uri):
            s3_client().upload_file(local_path, bucket, key, Config=TransferConfig(multipart_chunksize=chunk_bytes,
                                                                                   use_threads=False))
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    target = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
    with open(local_path, "rb") as src, fs.open_output_stream(target) as f:
        while chunk := src.read(chunk_bytes):
            f.write(chunk)
    os.replace(target, path)


@contextmanager
def _as_os_errors(uri: str) -> Iterator[None]:
    """boto3's failures as the storage layer's (pyarrow's) are: ``PermissionError`` for a refused request,
    ``FileNotFoundError`` for a missing bucket, ``ConnectionError`` / ``TimeoutError`` when the server is not
    reached, an ``OSError`` with ``EIO`` (transient: :func:`is_transient`) for a server error, else ``OSError``."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import ClientError, ConnectionError as BotoConnectionError
    from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

    try:
        yield
    except ClientError as e:
        err = e.response.get("Error", {})
        code, status = str(err.get("Code", "")), e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        text = f"writing {uri}: {code or status}: {err.get('Message') or e}"[:500]
        if status == 403 or code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            raise PermissionError(errno.EACCES, text) from None
        if code == "NoSuchBucket":
            raise FileNotFoundError(errno.ENOENT, text) from None
        if isinstance(status, int) and status >= 500 or code in ("SlowDown", "RequestTimeout", "Throttling"):
            raise OSError(errno.EIO, text) from None
        raise OSError(text) from None
    except (ConnectTimeoutError, ReadTimeoutError) as e:
        raise TimeoutError(f"writing {uri}: {e}"[:500]) from None
    except BotoConnectionError as e:
        raise ConnectionError(f"writing {uri}: {e}"[:500]) from None
    except S3UploadFailedError as e:  # boto3's transfer wraps the request's error in its text
        refused = re.search(r"AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|\(403\)", str(e))
        raise (PermissionError(errno.EACCES, f"writing {uri}: {e}"[:500]) if refused
               else OSError(errno.EIO, f"writing {uri}: {e}"[:500])) from None


#: the environment's credential variables: a boto3 client keeps the keys it was built with, where pyarrow's reads the
#: environment at every request, so a client is kept per value of these (a process whose keys change gets a new one)
_CREDENTIAL_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                    "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE")


def s3_client(settings: StorageSettings | None = None) -> Any:
    """boto3's S3 client for ``settings`` (default: the current ones): the same endpoint, region and credential
    chain as pyarrow's filesystem, for what pyarrow's output stream cannot do (whole-object and conditional writes)."""
    keys = hashlib.sha256("\0".join(os.environ.get(v, "") for v in _CREDENTIAL_VARS).encode()).hexdigest()
    return _boto3_client(settings or current(), keys)


@lru_cache(maxsize=8)
def _boto3_client(settings: StorageSettings, keys: str) -> Any:  # ``keys``: a digest of the credential variables
    import boto3
    from botocore.config import Config

    options, timeout_s = settings.s3, settings.read_timeout_s
    endpoint = options.endpoint_override
    if endpoint and "://" not in endpoint:
        endpoint = f"{options.scheme or 'https'}://{endpoint}"
    cfg = Config(connect_timeout=timeout_s, read_timeout=timeout_s, retries={"max_attempts": 3, "mode": "standard"},
                 s3={"addressing_style": "path" if endpoint else "auto"})
    # no keys passed: boto3 reads the standard AWS chain, as pyarrow does; a session of its own, since boto3's
    # default session resolves the chain once and hands those keys to every client it builds after
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=endpoint, region_name=options.region, config=cfg)


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


def list_dirs(uri: str) -> list[str]:
    """The names of the direct sub-directories (local) or sub-prefixes (``s3://``) of ``uri``, unsorted;
    [] when ``uri`` does not exist. Raises ``OSError`` when it cannot be listed."""
    fs, path = resolve(uri)
    path = path.rstrip("/")
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=False))
    return [posixpath.basename(i.path.rstrip("/")) for i in infos if i.type == pafs.FileType.Directory]


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

    def upload_file(self, local_path: str, uri: str) -> None:
        upload_file(local_path, self.check(uri))

    def delete(self, uri: str) -> bool:
        return delete(self.check(uri))
