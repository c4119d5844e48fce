"""The failover history in the Airflow UI: a small FastAPI app mounted by the plugin at ``/region-failover``.

Rules: read-only; it shows the run's decision log (:mod:`.history`) as HTML and JSON and nothing else (no
credentials, no object keys). It is reached from the DAG-run page through the plugin's ``external_views`` entry.
A store that cannot be reached gives a clear 503 page, never an exception in the API server.
"""

from __future__ import annotations

import html
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse

from airflow_region_failover.plugins.history import format_history, load_history

URL_PREFIX = "/region-failover"


def _load(dag_id: str, run_id: str) -> dict[str, Any]:
    try:
        return load_history(dag_id, run_id)
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"failover history unavailable: {type(exc).__name__}") from exc


def _page(doc: dict[str, Any]) -> str:
    title = html.escape(f"Region failover — {doc['dag_id']} / {doc['run_id']}")
    body = html.escape(format_history(doc))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body style='font-family:sans-serif'><h2>{title}</h2><pre>{body}</pre></body></html>")


def create_app() -> FastAPI:
    """The FastAPI app: ``/history/{dag_id}/{run_id}`` (HTML) and ``/api/history/{dag_id}/{run_id}`` (JSON)."""
    app = FastAPI(title="Region failover", description="Failover decisions of DAG runs")

    @app.get("/history/{dag_id}/{run_id:path}", response_class=HTMLResponse)
    def history_page(dag_id: str, run_id: str) -> str:
        return _page(_load(dag_id, run_id))

    @app.get("/api/history/{dag_id}/{run_id:path}")
    def history_json(dag_id: str, run_id: str) -> dict[str, Any]:
        return _load(dag_id, run_id)

    return app
