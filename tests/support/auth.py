"""An auth manager for the end-to-end stack: Airflow's simple auth manager, except that the users listed in
``RF_TEST_DAG_DENIED`` (``user:dag_id,...``) have no access to those DAGs — so a test can sign in as a user who
may not see one DAG, which the simple auth manager (role-based, no per-DAG rules) cannot express."""

from __future__ import annotations

import os
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


def _denied() -> set[tuple[str, str]]:
    pairs = (item.split(":", 1) for item in os.environ.get("RF_TEST_DAG_DENIED", "").split(",") if ":" in item)
    return {(user, dag) for user, dag in pairs}


class DagDenyingAuthManager(SimpleAuthManager):
    """:class:`SimpleAuthManager` with per-DAG denials for the listed users."""

    def is_authorized_dag(self, *, method: Any, user: Any, access_entity: Any = None, details: Any = None) -> bool:
        dag_id = getattr(details, "id", None)
        if dag_id and (user.get_name(), dag_id) in _denied():
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
