"""A small client for Airflow 3's public REST API (``/api/v2``): how the failover loop performs a restart.

Rules:
- Every change to task instances goes through the *public* API, authenticated like any user: a JWT from
  ``POST /auth/token`` (username/password of the configured auth manager) or a pre-issued token.
- Credentials come from an Airflow connection (or the caller); they are never logged, and ``repr`` hides them.
- Clearing uses ``dry_run: false, only_failed: false, reset_dag_runs: true``: the API's defaults (dry run, only
  failed tasks, run left as is) would leave a failed run failed and its cleared tasks never scheduled.
- Calls are bounded: a timeout per request and a few retries — of idempotent calls only (GET, PATCH, PUT), on
  connection errors and 5xx answers. A POST is re-sent only when it never reached the server (connection
  refused), a trigger also when its answer was lost or was a 5xx (below); a POST clear whose answer was lost raises
  :class:`ClearOutcomeUnknown` instead, since a second clear would kill the tries the first one started. A
  trigger names its run itself (:func:`manual_run_id` unless the caller names it), so one whose answer was lost or
  failed is sent again: a 409 for that id on a later try means an earlier try created the run.
- A JWT that expired (401) is fetched again once; a pre-issued token from the connection is read again from the
  connection once (whoever issues tokens rotates them there).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx

from airflow_region_failover import conf
from airflow_region_failover.exceptions import ClearOutcomeUnknown, RestError
from airflow_region_failover.process_cache import per_process

__all__ = ["AirflowRestClient", "ApiCredentials", "ClearOutcomeUnknown", "RestError", "RunEnd", "default_api"]

DEFAULT_TIMEOUT = 10.0
RETRIES = 3
FAILED_GRACE_S = 15.0
"""How long a run must stay ``failed`` before :meth:`AirflowRestClient.final_state` takes it as final."""


class RunEnd:
    """Whether a run's state, read poll after poll, is final. ``success`` is, at once. ``failed`` is once it has
    stayed failed ``grace`` seconds: the scheduler marks a run failed as soon as every task instance is finished,
    also when the failover loop is about to clear the failed region and put the run back to ``running`` — a
    watcher that took that moment as the end would abandon a run that recovers. Any other state resets the
    wait."""

    def __init__(self, grace: float = FAILED_GRACE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace, self._clock = grace, clock
        self._failed_since: float | None = None

    def final(self, state: str) -> bool:
        """Whether ``state``, just read, is the run's final state."""
        if state == "success":
            return True
        if state != "failed":
            self._failed_since = None
            return False
        now = self._clock()
        if self._failed_since is None:
            self._failed_since = now
        return now - self._failed_since >= self.grace


@dataclass(frozen=True)
class ApiCredentials:
    """Where the API is and who we are. ``token`` wins over username/password when given."""

    base_url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)

    @classmethod
    def from_connection(cls, conn: Any) -> ApiCredentials:
        """Build from an Airflow connection: ``http(s)://login:password@host:port``; extra ``token`` optional.

        The connection's schema may be ``https``; a connection whose host already is a URL is taken as is.
        """
        extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
        host = conn.host or "127.0.0.1"
        if "://" in host:
            base = host.rstrip("/")
        else:
            scheme = conn.schema or extra.get("scheme") or "http"
            port = f":{conn.port}" if conn.port else ""
            base = f"{scheme}://{host}{port}"
        return cls(base, conn.login, conn.password, extra.get("token"))


def _q(part: str) -> str:
    return quote(part, safe="")


class AirflowRestClient:
    """Authenticated calls to ``/api/v2``. One ``httpx.Client`` per instance; close it (or use ``with``)."""

    def __init__(self, creds: ApiCredentials, timeout: float = DEFAULT_TIMEOUT,
                 reload: Callable[[], ApiCredentials] | None = None) -> None:
        self._creds = creds
        self._reload = reload
        self._http = httpx.Client(base_url=creds.base_url, timeout=timeout)
        self._token: str | None = creds.token

    def __enter__(self) -> AirflowRestClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool."""
        self._http.close()

    def __repr__(self) -> str:
        return f"AirflowRestClient({self._creds.base_url!r})"

    # -- plumbing ---------------------------------------------------------------------------------------------
    def token(self) -> str:
        """Return a JWT, fetching one from ``POST /auth/token`` on first use."""
        if self._token is None:
            body = {"username": self._creds.username, "password": self._creds.password}
            resp = self._send("POST", "/auth/token", json=body, auth=False)
            self._token = str(resp.json()["access_token"])
        return self._token

    def _send(self, method: str, path: str, *, auth: bool = True, named: bool = False, **kw: Any) -> httpx.Response:
        """One call with the module's retries. ``named``: a POST that names what it creates (a trigger's run id), sent
        again after a lost or 5xx answer too; a 409 after such an answer is returned, as that earlier try's success."""
        idempotent = method in ("GET", "PATCH", "PUT", "DELETE")
        last, refreshed, lost = "", False, False
        for attempt in range(RETRIES):
            headers = {"Authorization": f"Bearer {self.token()}"} if auth else {}
            try:
                resp = self._http.request(method, path, headers=headers, **kw)
            except httpx.ConnectError as exc:  # never reached the server: safe to send again
                last = type(exc).__name__
            except httpx.TransportError as exc:
                if not (idempotent or named) or (named and attempt == RETRIES - 1):
                    raise self._lost(method, path, exc) from exc
                last, lost = type(exc).__name__, True
            else:
                if resp.status_code == 401 and auth and not refreshed:
                    refreshed = self._renew_credentials()
                    if refreshed:
                        continue
                if resp.status_code == 409 and named and lost:
                    return resp
                if resp.status_code < 400:
                    return resp
                if resp.status_code < 500 or not (idempotent or named):
                    raise RestError(f"{method} {path} -> HTTP {resp.status_code}: {resp.text[:300]}",
                                    resp.status_code)
                last, lost = f"HTTP {resp.status_code}", lost or named
            time.sleep(0.2 * (attempt + 1) * (0.5 + secrets.SystemRandom().random()))  # apart from the others'
        raise RestError(f"{method} {path} failed after {RETRIES} attempts ({last})")

    def _renew_credentials(self) -> bool:
        """After a 401: forget an expired JWT, or read a pre-issued token again; whether there is anything new."""
        if self._creds.token is None:
            self._token = None
            return True
        if self._reload is None:
            return False
        self._creds = self._reload()
        self._token = self._creds.token
        return True

    @staticmethod
    def _lost(method: str, path: str, exc: Exception) -> RestError:
        what = f"{method} {path}: no answer ({type(exc).__name__}); it may or may not have taken effect"
        return ClearOutcomeUnknown(what) if path.endswith("/clearTaskInstances") else RestError(what)

    def get(self, path: str, **params: Any) -> Any:
        """GET ``/api/v2`` + path, returning the JSON body."""
        return self.call("GET", path, params=params or None).json()

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """Any call of the public API (``/api/v2`` + path), with this client's token, timeout and retries (only
        idempotent calls are sent again); ``kw`` as httpx's (``json=``, ``params=``)."""
        return self._send(method, "/api/v2" + path, **kw)

    # -- DAGs and runs ------------------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        """``GET /api/v2/monitor/health`` (no auth needed)."""
        return dict(self._send("GET", "/api/v2/monitor/health", auth=False).json())

    def dag(self, dag_id: str) -> dict[str, Any]:
        """The DAG's REST representation; raises :class:`RestError` (404) while it is not parsed yet."""
        return dict(self.get(f"/dags/{_q(dag_id)}"))

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, run_id: str | None = None,
                logical_date: str | None = None) -> str:
        """Create a manual run now (for ``logical_date``, ISO 8601, if given) and return its run id (``run_id``, else
        :func:`manual_run_id`); a request whose answer was lost is sent again under the same id (module rule)."""
        body: dict[str, Any] = {"logical_date": logical_date, "conf": dict(conf or {}),
                                "dag_run_id": run_id or manual_run_id()}
        self._send("POST", f"/api/v2/dags/{_q(dag_id)}/dagRuns", json=body, named=True)
        return str(body["dag_run_id"])  # the server's answer holds the same id, and a 409 after a lost answer none

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """The run's REST representation (``state``, ``note``, dates, ``conf``)."""
        return dict(self.get(f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}"))

    def set_run_note(self, dag_id: str, run_id: str, note: str) -> None:
        """Replace the run's note (shown in the UI's run details)."""
        path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}"
        self._send("PATCH", path, params={"update_mask": "note"}, json={"note": note})

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        """Every task instance of the run (``task_id``, ``map_index``, ``state``, ``try_number``...)."""
        path = f"/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances"
        out: list[dict[str, Any]] = []
        while True:
            page = self.get(path, limit=100, offset=len(out))
            out.extend(page["task_instances"])
            if not page["task_instances"] or len(out) >= page["total_entries"]:
                return out

    def clear(self, dag_id: str, run_id: str, task_ids: Iterable[str | tuple[str, int]]) -> list[dict[str, Any]]:
        """Clear exactly ``task_ids`` in run ``run_id`` (no downstream/upstream expansion) and requeue the run.

        Returns the task instances the server cleared. Running ones become ``restarting`` and are stopped.
        """
        ids = [list(t) if isinstance(t, tuple) else t for t in task_ids]
        body = {
            "dag_run_id": run_id,
            "task_ids": ids,
            "dry_run": False,
            "only_failed": False,
            "reset_dag_runs": True,
            "include_upstream": False,
            "include_downstream": False,
        }
        resp = self._send("POST", f"/api/v2/dags/{_q(dag_id)}/clearTaskInstances", json=body)
        return list(resp.json().get("task_instances", []))

    def final_state(self, dag_id: str, run_id: str, timeout: float = 900.0, grace: float = FAILED_GRACE_S,
                    poll: float = 0.5) -> str:
        """Poll until the run's state is final by :class:`RunEnd`'s rule (``failed`` only once it stayed failed
        ``grace`` seconds); return it, or raise ``TimeoutError`` after ``timeout`` seconds. A poll the server did not
        answer (or answered with a 5xx) after the client's retries is polled again until the deadline, as
        :meth:`wait_for_dag` does, and leaves the last state read as it was: a busy server delays the wait's end, never
        ends the wait; any other error ends it."""
        deadline, end, state = time.monotonic() + timeout, RunEnd(grace), "?"
        while time.monotonic() < deadline:
            try:
                state = str(self.dag_run(dag_id, run_id)["state"])
            except RestError as exc:
                if exc.status is not None and exc.status < 500:
                    raise
            else:
                if end.final(state):
                    return state
            time.sleep(poll)
        raise TimeoutError(f"run {dag_id}/{run_id} still {state!r} after {timeout:.0f} s")

    def wait_for_dag(self, dag_id: str, timeout: float = 120.0) -> dict[str, Any]:
        """Poll until the dag-processor has parsed ``dag_id``; return its representation."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.dag(dag_id)
            except RestError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)


def manual_run_id() -> str:
    """A new manual run's id, as Airflow names one (``manual__<UTC time>``) with a random suffix, so that two
    triggers in the same microsecond never share it."""
    return f"manual__{datetime.now(timezone.utc).isoformat()}_{secrets.token_hex(3)}"


def _connection_credentials() -> ApiCredentials:
    """The credentials of connection ``[region_failover] api_conn_id``, read now."""
    return ApiCredentials.from_connection(conf.connection(conf.api_conn_id()))


@per_process()
def default_api() -> AirflowRestClient:
    """The REST client of connection ``[region_failover] api_conn_id``, built once per process (it reads the
    connection again when a pre-issued token is refused)."""
    return AirflowRestClient(_connection_credentials(), reload=_connection_credentials)
