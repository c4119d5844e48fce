"""The failover history in the Airflow UI: a small FastAPI app mounted by the plugin at ``/region-failover``.

Rules: read-only; it shows the run's decision log (:mod:`.history`) as HTML and JSON and nothing else (no
credentials, no object keys). It is reached from the DAG-run page through the plugin's ``external_views`` entry.
A store that cannot be reached gives a clear 503 page, never an exception in the API server.

Authorised like Airflow's own pages: Airflow does not authenticate plugin apps, so every route depends on
Airflow's ``requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN)`` for the ``dag_id`` in its path
(which resolves the user with ``get_user``: a bearer token, or the UI's session cookie — a same-origin iframe is
signed in). No user: 401; a user without read access to the DAG's runs: 403.
"""

from __future__ import annotations

import html
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.plugins.history import format_history, load_history

URL_PREFIX = "/region-failover"


def _load(dag_id: str, run_id: str) -> RunLog:
    try:
        return load_history(dag_id, run_id)
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"failover history unavailable: {type(exc).__name__}") from exc


def _page(doc: RunLog) -> str:
    title = html.escape(f"Region failover — {doc.dag_id} / {doc.run_id}")
    body = html.escape(format_history(doc))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body style='font-family:sans-serif'><h2>{title}</h2><pre>{body}</pre></body></html>")


def create_app() -> FastAPI:
    """The FastAPI app: ``/history/{dag_id}/{run_id}`` (HTML) and ``/api/history/{dag_id}/{run_id}`` (JSON)."""
    read_runs = Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN))
    app = FastAPI(title="Region failover", description="Failover decisions of DAG runs", dependencies=[read_runs])

    @app.get("/history/{dag_id}/{run_id:path}", response_class=HTMLResponse)
    def history_page(dag_id: str, run_id: str) -> str:
        return _page(_load(dag_id, run_id))

    @app.get("/api/history/{dag_id}/{run_id:path}")
    def history_json(dag_id: str, run_id: str) -> dict[str, Any]:
        return _load(dag_id, run_id).to_json()

    return app
