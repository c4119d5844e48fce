"""How S3 is reached: credentials and the process's clients.

Rules: credentials come from an Airflow ``aws`` connection through the amazon provider's ``S3Hook``: the
process's client is built from the hook's session, whose credentials object refreshes itself (instance roles,
IRSA, ``role_arn``: botocore's refreshable credentials), so a long-lived process (the scheduler's watcher, the
API server's history view) keeps working past the first expiry. Whatever leaves the process — the access shipped
to Spark executors, the environment of a spark-submitted script — carries credentials frozen at that moment
(:func:`portable`): a Spark task or script must finish within their remaining lifetime (with botocore's refresh
windows at least ~10 minutes, typically an hour for STS). Tests, the CLI and :meth:`ResultStore.from_endpoint`
pass static credentials; without either, boto3's default chain applies. Secrets are never part of a ``repr`` or a
log line. A boto3 client is created once per process and :class:`S3Access` and reused (creating one costs
~0.5 s; a forked child builds its own, :mod:`~airflow_region_failover.process_cache`); retries and timeouts
are bounded so an unreachable server yields :class:`~airflow_region_failover.exceptions.StoreUnreachable`
quickly.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import Any

from airflow_region_failover import conf
from airflow_region_failover.process_cache import per_process

DEFAULT_CONN_ID = conf.declared_default("store_aws_conn_id")


@dataclass(frozen=True)
class S3Credentials:
    """Static credentials; none of them appears in ``repr``."""

    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class S3Access:
    """Everything needed to build a client anywhere (driver or Spark executor): picklable, secrets hidden.

    ``conn_id``: the Airflow ``aws`` connection whose hook session (refreshable credentials) signs this process's
    requests; it only works where that connection can be read, so executors get :func:`portable` access instead.
    """

    endpoint_url: str | None = None
    region: str = "us-east-1"
    credentials: S3Credentials | None = field(default=None, repr=False)
    max_attempts: int = 4
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    max_pool_connections: int = 16
    conn_id: str | None = None

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``boto3.client("s3", ...)`` (path-style addressing for custom endpoints)."""
        from botocore.config import Config

        config = Config(
            retries={"max_attempts": self.max_attempts, "mode": "standard"},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            max_pool_connections=self.max_pool_connections,
            s3={"addressing_style": "path"} if self.endpoint_url else {},
        )
        kwargs: dict[str, Any] = {"region_name": self.region, "config": config}
        if self.endpoint_url:
            kwargs["endpoint_url"] = self.endpoint_url
        if self.credentials:
            kwargs["aws_access_key_id"] = self.credentials.access_key
            kwargs["aws_secret_access_key"] = self.credentials.secret_key
            kwargs["aws_session_token"] = self.credentials.session_token
        return kwargs


def access_from_airflow(conn_id: str = DEFAULT_CONN_ID, **tuning: Any) -> S3Access:
    """Resolve an Airflow ``aws`` connection into :class:`S3Access`: endpoint and region from the connection,
    credentials from its hook session when a client is built (:func:`client_for`), never copied here."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    hook = S3Hook(aws_conn_id=conn_id)
    session = hook.get_session()
    endpoint = hook.conn_config.get_service_endpoint_url("s3")
    region = session.region_name or hook.conn_config.region_name or "us-east-1"
    return S3Access(endpoint_url=endpoint, region=region, conn_id=conn_id, **tuning)


_SESSIONS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()  # client -> the session it came from


@per_process(maxsize=64)
def client_for(access: S3Access) -> Any:
    """The process-wide boto3 S3 client for ``access`` (created once, reused; boto3 clients are thread-safe).

    With ``access.conn_id`` the client comes from the connection's ``S3Hook`` session and signs every request with
    that session's (refreshing) credentials; otherwise from a plain boto3 session (static or default-chain
    credentials). Bounded: executors see one access per write, each with other frozen credentials.
    """
    import boto3

    if access.conn_id is not None:
        from airflow.providers.amazon.aws.hooks.s3 import S3Hook

        session = S3Hook(aws_conn_id=access.conn_id).get_session()
    else:
        session = boto3.session.Session()
    client = session.client("s3", **access.client_kwargs())
    _SESSIONS[client] = session
    return client


def portable(access: S3Access) -> S3Access:
    """``access`` as it may leave this process (to a Spark executor or a spark-submitted script): the current
    credentials of its connection's session frozen into it (refreshed first if they are about to expire)."""
    if access.conn_id is None:
        return access
    credentials = _SESSIONS[client_for(access)].get_credentials()
    frozen = None
    if credentials is not None:
        current = credentials.get_frozen_credentials()
        frozen = S3Credentials(current.access_key, current.secret_key, current.token)
    return dataclasses.replace(access, credentials=frozen, conn_id=None)
