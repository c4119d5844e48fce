"""Start and stop a real local Airflow 3 (api-server + scheduler + dag-processor by default) for
``region-failover standalone``, the demo and the e2e tests.

Rules:
- Everything lives in a fresh ``AIRFLOW_HOME`` (SQLite metadata DB, LocalExecutor, logs) unless one is given;
  nothing is read from or written to the user's own Airflow configuration. A production-like stack names its
  own database, executor and components (two schedulers, a triggerer, a Celery worker): each component instance
  gets its own log file and its own free ports for the servers a component opens (health check, log server).
- The API listens on 127.0.0.1 on a free port; the simple auth manager has one admin user whose password we
  choose (written to its passwords file before start), so the REST API and the UI log-in are known. The home is
  created 0700 and every secret in it (the passwords file, the API's secret key and JWT secret) is written 0600
  from its first byte (:mod:`.secret_files`). The stack is up once its components are healthy and listen on
  their ports themselves (a clash: new ports, :mod:`.processes`).
- The failover loop reaches the same API through the connection ``region_failover_api`` (set via
  ``AIRFLOW_CONN_REGION_FAILOVER_API``); extra connections/config come in ``extra_env``.
- ``stop()`` ends every process it started, including task processes and the JVMs they may have spawned
  (process trees are walked, never killed by name).
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
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from airflow_region_failover.plugins.rest import AirflowRestClient, ApiCredentials, RestError
from airflow_region_failover.standalone import processes, sqlite
from airflow_region_failover.standalone.processes import ensure_guard, free_ports, inherited_environment, register
from airflow_region_failover.standalone.secret_files import kept_secret, write_secret

#: instance name -> ``airflow`` sub-command: what ``airflow standalone`` runs (LocalExecutor)
COMPONENTS: dict[str, tuple[str, ...]] = {
    "api-server": ("api-server",), "scheduler": ("scheduler",), "dag-processor": ("dag-processor",)}
#: components whose health the api-server's ``/api/v2/monitor/health`` reports, by sub-command
_HEALTH = {"scheduler": "scheduler", "dag-processor": "dag_processor", "triggerer": "triggerer"}
API_CONN_ENV = "AIRFLOW_CONN_REGION_FAILOVER_API"
#: the settings a stack derives from its own arguments, which an ``AIRFLOW__`` variable exported to
#: ``region-failover standalone`` cannot change (it says so, naming what decides them)
WIRING: Mapping[str, str] = {
    "AIRFLOW__CORE__DAGS_FOLDER": "--dags decides it",
    "AIRFLOW__API__PORT": "--port decides it", "AIRFLOW__API__BASE_URL": "--port decides it",
    "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": "--port decides it",
    "AIRFLOW__API__HOST": "the stack listens on 127.0.0.1 only",
    "AIRFLOW__CORE__AUTH_MANAGER": "the stack's log-in is the simple auth manager's",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "the stack's users are its admin and the failover loop's user",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": "--home decides it",
}
#: sub-command -> the ``[logging]`` port its log server listens on (a scheduler's with a LocalExecutor only)
_LOG_SERVER = {"scheduler": "WORKER", "celery": "WORKER", "triggerer": "TRIGGER"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    return free_ports(1)[0]


@dataclass
class AirflowStack:
    """A local Airflow 3: call :meth:`start`, use :meth:`client`, always :meth:`stop` (or use ``with``)."""

    dags_folder: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    home: Path | None = None
    port: int = 0
    username: str = "admin"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12), repr=False)
    #: further users of the simple auth manager, name -> role (``viewer``, ``user``, ``op``, ``admin``); their
    #: passwords are generated (:attr:`passwords`).
    users: Mapping[str, str] = field(default_factory=dict)
    #: the ``[core] auth_manager`` class path (default: Airflow's simple auth manager)
    auth_manager: str | None = None
    #: the user the failover loop calls the REST API as (role ``user``: may clear tasks and write run notes), so
    #: its clears are told apart from a person's in the audit log
    api_user: str = "region-failover"
    parallelism: int = 4
    #: directories put before ``PYTHONPATH`` in every component (e.g. a checkout's test support code)
    pythonpath: tuple[str, ...] = ()
    #: instance name -> ``airflow`` sub-command and arguments (default: :data:`COMPONENTS`)
    components: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: dict(COMPONENTS))
    executor: str = "LocalExecutor"
    #: SQLAlchemy URL of the metadata DB (default: SQLite in the home)
    database_url: str | None = None
    _ports: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    _held: set[str] = field(default_factory=set, repr=False)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, repr=False)
    _logs: list[IO[bytes]] = field(default_factory=list, repr=False)
    supervise: bool = True
    restarts: dict[str, int] = field(default_factory=dict)
    _own_home: bool = False
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    passwords: dict[str, str] = field(default_factory=dict, repr=False)

    # -- life-cycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> AirflowStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL of the UI and the API."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> AirflowStack:
        """Migrate the DB, start the three components and wait until the health endpoint reports healthy."""
        if self.home is None:
            self.home = Path(tempfile.mkdtemp(prefix="rf-airflow-"))
            self._own_home = True
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        given, self.port = self.port, self.port or free_port()
        self.passwords = {self.username: self.password,
                          **{name: secrets.token_urlsafe(12) for name in [*self.users, self.api_user]}}
        write_secret(self.home / "passwords.json", json.dumps(self.passwords))
        ensure_guard()
        self._run_once(["db", "migrate"], self.env(), timeout)
        processes.start_with_retries(lambda: self._start_components(timeout), lambda: self._stop_for_retry(given),
                                     "Airflow", retry_on=(processes.PortTaken,))
        if self.supervise:
            threading.Thread(target=self._supervise, name="airflow-stack-supervisor", daemon=True).start()
        return self

    def _start_components(self, timeout: float) -> None:
        env = self.env()
        for component in self.components:
            self._spawn(component, env)
        self.wait_healthy(timeout)

    def _stop_for_retry(self, given: int) -> None:
        with self._lock:
            self._stop_processes(10.0)
        self.port, self._ports = given or free_port(), {}

    def _supervise(self, every: float = 2.0) -> None:
        """Restart a component that exits (as systemd/Kubernetes would); count it in ``restarts``."""
        while not self._stopping.wait(every):
            with self._lock:
                dead = [name for name, p in self._procs.items() if p.poll() is not None and name not in self._held]
                for name in dead:
                    register(self._procs[name].pid, stopped=True)
                    self.restarts[name] = self.restarts.get(name, 0) + 1
                    self._spawn(name, self.env())

    def stop(self, grace: float = 10.0) -> None:
        """Terminate every process started here (SIGTERM, then SIGKILL after ``grace``), children included."""
        self._stopping.set()
        with self._lock:
            self._stop_processes(grace)
        for log in self._logs:
            log.close()
        self._logs.clear()
        if self._own_home and self.home is not None and not os.environ.get("RF_KEEP_AIRFLOW_HOME"):
            shutil.rmtree(self.home, ignore_errors=True)

    def _stop_processes(self, grace: float) -> None:
        procs = [psutil.Process(p.pid) for p in self._procs.values() if p.poll() is None]
        tree: list[psutil.Process] = []
        for proc in procs:
            try:
                tree.extend([proc, *proc.children(recursive=True)])
            except psutil.NoSuchProcess:
                continue
        for proc in tree:
            _signal(proc, signal.SIGTERM)
        _, alive = psutil.wait_procs(tree, timeout=grace)
        for proc in alive:
            _signal(proc, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=5)
        for popen in self._procs.values():
            popen.poll()
            register(popen.pid, stopped=True)
        self._procs.clear()

    # -- configuration ----------------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        """The environment of every component (and of the task processes they start)."""
        assert self.home is not None
        home = str(self.home)
        conn = {"conn_type": "http", "host": "127.0.0.1", "port": self.port,
                "login": self.api_user, "password": self.passwords.get(self.api_user, "")}
        env = inherited_environment(("AIRFLOW__",))
        env.update({
            "AIRFLOW_HOME": home,
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(self.home / "plugins"),
            "AIRFLOW__CORE__EXECUTOR": self.executor,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                [f"{self.username}:admin", f"{self.api_user}:user",
                 *(f"{name}:{role}" for name, role in self.users.items())]),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": f"{home}/passwords.json",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__FERNET_KEY": "",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database_url or f"sqlite:///{home}/airflow.db",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": _stable_secret(self.home, "secret_key"),
            "AIRFLOW__API_AUTH__JWT_SECRET": _stable_secret(self.home, "jwt_secret"),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "60",
            "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "5",
            # the supervisor notices its task process's exit at most this late (docs/operator/failover-loop.md)
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": "127.0.0.1",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": f"{home}/logs",
            API_CONN_ENV: json.dumps(conn),
            "PYTHONPATH": os.pathsep.join(filter(None, [*self.pythonpath, os.environ.get("PYTHONPATH")])),
            "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        })
        if self.database_url is None:  # the components queue for SQLite's write lock (standalone/sqlite.py)
            env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS"] = sqlite.IMPORT_PATH
            env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC"] = sqlite.IMPORT_PATH
        if self.auth_manager:
            env["AIRFLOW__CORE__AUTH_MANAGER"] = self.auth_manager
        env.update(self.extra_env)
        return env

    def credentials(self, user: str | None = None) -> ApiCredentials:
        """Credentials of ``user`` (default: the admin user) for :class:`AirflowRestClient`."""
        name = user or self.username
        return ApiCredentials(self.url, name, self.passwords.get(name, self.password))

    def client(self) -> AirflowRestClient:
        """A new REST client logged in as the admin user (close it when done)."""
        return AirflowRestClient(self.credentials())

    # -- processes --------------------------------------------------------------------------------------------
    def _run_once(self, args: list[str], env: dict[str, str], timeout: float) -> None:
        done = subprocess.run([*_airflow_cmd(), *args], env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed: {done.stderr[-2000:]}")

    def _instance_ports(self, component: str) -> dict[str, str]:
        """The ports one component instance opens, picked once and kept across its restarts."""
        if component not in self._ports:
            health, logs, triggerer_logs = free_ports(3)
            self._ports[component] = {
                "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(health),
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(logs),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(triggerer_logs)}
        return self._ports[component]

    def _spawn(self, component: str, env: dict[str, str]) -> None:
        assert self.home is not None
        log = (self.home / f"{component}.log").open("ab")
        self._logs.append(log)
        self._procs[component] = subprocess.Popen(
            [*_airflow_cmd(), *self.components[component]], env={**env, **self._instance_ports(component)},
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        register(self._procs[component].pid)

    def kill(self, component: str, sig: int = signal.SIGKILL, *, stay_down: bool = False, tree: bool = False) -> int:
        """Send ``sig`` to one component instance's whole process group (a crash) — with ``tree``, also to every
        descendant in another group (task processes: a lost machine); returns its pid. The supervisor (if on)
        starts it again, as systemd or Kubernetes would — unless ``stay_down``, until :meth:`revive`."""
        with self._lock:
            if stay_down:
                self._held.add(component)
            proc = self._procs[component]
            descendants: list[psutil.Process] = []
            if tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    descendants = psutil.Process(proc.pid).children(recursive=True)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            for child in descendants:
                _signal(child, sig)
            return proc.pid

    def revive(self, component: str) -> None:
        """Let the supervisor start a component kept down by :meth:`kill` again."""
        with self._lock:
            self._held.discard(component)

    def pid(self, component: str) -> int:
        """The process id of a running component instance."""
        return self._procs[component].pid

    def wait_healthy(self, timeout: float = 180.0) -> None:
        """Wait until metadatabase, scheduler and dag-processor report healthy; raise with log tails if not."""
        deadline = time.monotonic() + timeout
        last: Any = None
        with AirflowRestClient(self.credentials(), timeout=5.0) as api:
            while time.monotonic() < deadline:
                self._check_alive()
                try:
                    last = api.health() if self._listening() else last  # PortTaken: a clash, started again
                    if last and all(last.get(k, {}).get("status") == "healthy" for k in self._health_keys()):
                        api.token()
                        return
                except (RestError, OSError, ValueError):
                    pass
                time.sleep(0.5)
        raise TimeoutError(f"Airflow not healthy after {timeout:.0f} s: {last}\n{self.log_tails()}")

    def _listening(self) -> bool:
        """Whether every component instance listens itself on the ports picked for it (the API's, a log
        server's); :class:`PortTaken` if another process took one."""
        found = []
        for name, command in self.components.items():
            ports = [self.port] if command[0] == "api-server" else []
            if command[0] in _LOG_SERVER and (command[0] != "scheduler" or self.executor == "LocalExecutor"):
                ports.append(int(self._instance_ports(name)[f"AIRFLOW__LOGGING__{_LOG_SERVER[command[0]]}_LOG_SERVER_PORT"]))
            if ports and name in self._procs:
                found.append(processes.ours_listening(self._procs[name].pid, ports, f"Airflow {name}"))
        return all(found)

    def _health_keys(self) -> list[str]:
        commands = {command[0] for command in self.components.values()}
        return ["metadatabase", *(key for name, key in _HEALTH.items() if name in commands)]

    def _check_alive(self) -> None:
        dead = {name: p.returncode for name, p in self._procs.items() if p.poll() is not None}
        if dead and not self.supervise:
            raise RuntimeError(f"Airflow components exited: {dead}\n{self.log_tails()}")

    def log_tails(self, chars: int = 1500) -> str:
        """The end of each component's log (for error messages)."""
        assert self.home is not None
        parts = []
        for component in self.components:
            path = self.home / f"{component}.log"
            if path.exists():
                parts.append(f"--- {component} ---\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        """The text of one task attempt's log file ('' if absent)."""
        assert self.home is not None
        base = self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
        path = base / f"attempt={try_number}.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _airflow_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("airflow")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "airflow"]


def _stable_secret(home: Path, name: str) -> str:
    """A random secret kept in the home (0600), so restarted components share it (JWTs stay valid)."""
    return kept_secret(home / f".{name}", lambda: secrets.token_urlsafe(32))


def _signal(proc: psutil.Process, sig: int) -> None:
    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
        proc.send_signal(sig)
