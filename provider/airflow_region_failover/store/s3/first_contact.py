"""What a process's first S3 call says when the result store is not set up: one line naming the endpoint, the
Airflow connection and the fix, instead of botocore's traceback.

Rules (:func:`set_up_errors`, around
:meth:`~airflow_region_failover.store.result_store.ResultStore.start_up`, the first S3 call of every task, CLI
command and scheduler-side component): no credentials anywhere (botocore's ``NoCredentialsError`` /
``PartialCredentialsError``) is :class:`~airflow_region_failover.exceptions.StoreNotConfigured` naming the
connection (``[region_failover] store_aws_conn_id``) and how to add one; an endpoint that does not answer after the
bounded retries is :class:`~airflow_region_failover.exceptions.StoreUnreachable` naming the endpoint, the
connection and where the endpoint is set (its extra's ``endpoint_url``). Neither names a credential.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from airflow_region_failover.exceptions import StoreNotConfigured, StoreUnreachable
from airflow_region_failover.store.s3.clients import S3Access

OPTION = "[region_failover] store_aws_conn_id"


def _connection(access: S3Access) -> str:
    if access.conn_id is None:
        return "no Airflow connection: explicit endpoint and keys"
    return f"connection {access.conn_id!r}, {OPTION}"


@contextlib.contextmanager
def set_up_errors(access: S3Access, endpoint: str) -> Iterator[None]:
    """Inside the block, the store's set-up mistakes become one-line errors (module rule)."""
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError  # deferred: boto3 is the adapter's

    conn = access.conn_id or "aws_default"
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise StoreNotConfigured(
            f"no AWS credentials for the result store at {endpoint} ({_connection(access)}): the connection does "
            f"not exist or has no keys, and boto3 found none; add it: airflow connections add {conn} --conn-type aws "
            "--conn-login ACCESS_KEY --conn-password SECRET_KEY [--conn-extra '{\"endpoint_url\": "
            "\"http://host:port\"}'], or give this process AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or a role"
        ) from exc
    except StoreUnreachable as exc:
        raise StoreUnreachable(
            f"the result store's S3 endpoint {endpoint} does not answer ({_connection(access)}; {exc}): check that "
            f"the server runs and the endpoint_url in the extra of connection {conn!r}"
        ) from exc
