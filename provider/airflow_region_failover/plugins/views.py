"""The failover views in the Airflow UI: a small FastAPI app mounted by the plugin at ``/region-failover``.

Rules: read-only; it shows a run's decision log (:mod:`.history`) and its job graph with the state of every
subtask in the run (:mod:`~airflow_region_failover.failover_view.page`), and the planner's dry run for a
DAG — as HTML and as JSON, nothing else (no credentials, no object keys). It is reached from the DAG-run page
("Failover" tab) and the DAG page ("Failover dry run") through the plugin's ``external_views`` entries. For a
job whose runs fix a plan both show it (:mod:`~airflow_region_failover.failover_view.run_plan`): the run's, and the
one the next run will fix.
A store that cannot be reached gives a clear 503 page, never an exception in the API server; a DAG without a
region-failover job gives 404.

Routes (``DAG_ID``, ``RUN_ID`` URL-encoded):

* ``/run/DAG_ID/RUN_ID[?decision=N]`` — the run's failover view (HTML); ``/api/run/DAG_ID/RUN_ID`` its JSON;
* ``/plan/DAG_ID[?failed=step#i&unavailable=p1,p2]`` — what would restart if a subtask failed (HTML), and a
  section on the DAG's AUTO edges (:mod:`~airflow_region_failover.failover_view.advice`: per AUTO edge the
  expected cost of persisting and of fusing, the figures with their runs, the choice, and the three plans'
  expected completion times); ``/api/plan/DAG_ID?failed=...`` its JSON (the ``region-failover plan`` CLI's answer);
* ``/api/advise/DAG_ID`` — the AUTO edges' advice as JSON (what ``region-failover advise DAG_ID -o json`` prints:
  the same computation, :func:`~.advice.advise`); the HTML section shows why when there is none, and the store
  or DB unreachable there is a note, not an error of the dry run (a 503 of the JSON route);
* ``/history/DAG_ID/RUN_ID`` (text) and ``/api/history/DAG_ID/RUN_ID`` (the raw decision log) as before.

Authorised like Airflow's own pages: Airflow does not authenticate plugin apps, so every route depends on
Airflow's ``requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN)`` for the ``dag_id`` in its path
(which resolves the user with ``get_user``: a bearer token, or the UI's session cookie — a same-origin iframe is
signed in). No user: 401; a user without read access to the DAG's runs: 403. FastAPI's own ``/docs``, ``/redoc``
and ``/openapi.json`` are off: they would answer without a login, and ``/docs`` loads scripts from a CDN into the
Airflow origin.
"""

from __future__ import annotations

import html
import logging
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse

from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.restart_plan import RestartPlan
from airflow_region_failover.failover.reuse_hint import reuse_hints
from airflow_region_failover.failover.run_log import RunLog
from airflow_region_failover.failover_view.advice import advice_section
from airflow_region_failover.failover_view.page import Checkpoints, TaskRow, plan_page, run_model, run_page
from airflow_region_failover.failover_view.run_plan import ShownPlan, planned
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.job import JobSpec
from airflow_region_failover.planning.stored import RunPlan
from airflow_region_failover.plugins.history import format_history, load_history

URL_PREFIX = "/region-failover"
log = logging.getLogger(__name__)


def _load(dag_id: str, run_id: str) -> RunLog:
    try:
        return load_history(dag_id, run_id)
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"failover history unavailable: {type(exc).__name__}") from exc


def _job(dag_id: str) -> JobSpec:
    """The job of the DAG's latest serialized version (as the scheduler's watcher reads it)."""
    from airflow_region_failover.plugins.metadata_db import serialized_job  # deferred: the metadata DB, on request

    try:
        spec = serialized_job(dag_id)
    except RegionFailoverError as exc:
        raise HTTPException(status_code=404, detail=f"DAG {dag_id!r}: {exc}") from exc
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"DAG {dag_id!r} unavailable: {type(exc).__name__}") from exc
    if spec is None:
        raise HTTPException(status_code=404, detail=f"DAG {dag_id!r} has no region-failover job (or does not exist)")
    return spec


def _run_job(dag_id: str, run_id: str | None) -> tuple[JobSpec, ShownPlan | None]:
    """The job as run ``run_id`` runs it, and the plan shown (:mod:`~..failover_view.run_plan`): for a job whose
    runs fix a plan, the run's stored plan — not fixed yet, or ``run_id`` ``None`` (the dry run): the plan the next
    run will fix from the decision stored for it; the view never fixes one —, a job rendered ``PER_RUN`` run as that
    plan says; any other job as rendered, no plan."""
    spec = _job(dag_id)
    if not planned(spec):
        return spec, None
    from airflow_region_failover.decisions.plans import Plans  # deferred: the store, on request
    from airflow_region_failover.store.result_store import default_store  # deferred: the store, on request

    try:
        plans = Plans(default_store().objects)
        fixed = plans.of_run(dag_id, run_id) if run_id is not None else None
        shown = ShownPlan(fixed, True) if fixed is not None else ShownPlan(RunPlan.of(plans.next(dag_id), 0.0), False)
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"the run's plan is unavailable: {type(exc).__name__}") from exc
    return spec.for_run(shown.plan.plan), shown


def _checkpoints(dag_id: str, run_id: str) -> Checkpoints:
    """The run's checkpoint history (tries resumed or started over, checkpoints completed); empty when the store
    cannot be read: the rest of the view still answers."""
    from airflow_region_failover.checkpoint.storage import history  # deferred: the store, on request
    from airflow_region_failover.store.result_store import default_store  # deferred: the store, on request

    try:
        store = default_store()
        return history(store.objects, store.run_keys(dag_id, run_id))
    except Exception:
        log.warning("region failover: no checkpoint history for %s/%s", dag_id, run_id, exc_info=True)
        return []


def _rows(dag_id: str, run_id: str) -> list[TaskRow]:
    try:
        return task_rows(dag_id, run_id)
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"task instances unavailable: {type(exc).__name__}") from exc


def task_rows(dag_id: str, run_id: str) -> list[TaskRow]:
    """The run's task instances (state, try, end time) from the metadata DB (the API server has a session)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (session.query(TaskInstance.task_id, TaskInstance.state, TaskInstance.try_number,
                              TaskInstance.end_date)
                .filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id).all())
    return [TaskRow(str(task_id), None if state is None else str(getattr(state, "value", state)),
                    int(tries or 0), end.timestamp() if end is not None else None)
            for task_id, state, tries, end in rows]


def _plan(spec: JobSpec, failed: str, unavailable: str) -> RestartPlan:
    """The planner's dry run: ``failed`` fails, the listed partitions are gone, every other result committed."""
    try:
        subtask = SubtaskId.parse(failed)
        spec.topology.regions.number(subtask)
        gone = [PartitionId.parse(p.strip()) for p in unavailable.split(",") if p.strip()]
        for partition in gone:
            spec.graph.result(partition.result)
    except (RegionFailoverError, ValueError) as exc:
        raise HTTPException(status_code=400, detail=f"dry run: {exc}") from exc
    return spec.plan(subtask, KnownAvailability.except_(gone))


def _advice(dag_id: str, spec: JobSpec) -> Any:
    """The AUTO edges' advice (:func:`.advice.advise`); :class:`HTTPException` 503 naming what could not be read."""
    from airflow_region_failover.plugins import advice  # deferred: the store and the metadata DB, on request

    try:
        return advice.advise(dag_id, spec)
    except Exception as exc:
        raise HTTPException(status_code=503, detail=f"run history unavailable: {type(exc).__name__}") from exc


def _advice_html(dag_id: str, spec: JobSpec) -> str:
    """The dry run's AUTO section; a note when the history cannot be read (the rest of the dry run answers)."""
    try:
        found = _advice(dag_id, spec)
    except HTTPException as exc:
        return advice_section(None, str(exc.detail))
    return advice_section(found.decision, found.note, found.expected)


def _base(request: Request) -> str:
    """The app's mount path as the browser sees it (``[api] base_url``'s path + :data:`URL_PREFIX`)."""
    return str(request.scope.get("root_path") or URL_PREFIX).rstrip("/")


def _page(doc: RunLog) -> str:
    title = html.escape(f"Region failover — {doc.dag_id} / {doc.run_id}")
    body = html.escape(format_history(doc))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body style='font-family:sans-serif'><h2>{title}</h2><pre>{body}</pre></body></html>")


def create_app() -> FastAPI:
    """The FastAPI app (routes: module docstring)."""
    read_runs = Depends(requires_access_dag(method="GET", access_entity=DagAccessEntity.RUN))
    app = FastAPI(title="Region failover", description="Failover decisions of DAG runs", dependencies=[read_runs],
                  docs_url=None, redoc_url=None, openapi_url=None)  # no unauthenticated schema, no CDN scripts

    @app.get("/run/{dag_id}/{run_id:path}", response_class=HTMLResponse)
    def run_view(request: Request, dag_id: str, run_id: str, decision: int | None = None) -> str:
        (spec, shown), doc = _run_job(dag_id, run_id), _load(dag_id, run_id)
        return run_page(spec, doc, _rows(dag_id, run_id), decision, _base(request), _checkpoints(dag_id, run_id),
                        shown)

    @app.get("/api/run/{dag_id}/{run_id:path}")
    def run_json(dag_id: str, run_id: str) -> dict[str, Any]:
        (spec, shown), doc = _run_job(dag_id, run_id), _load(dag_id, run_id)
        return run_model(spec, doc, _rows(dag_id, run_id), _checkpoints(dag_id, run_id), shown)

    @app.get("/plan/{dag_id}", response_class=HTMLResponse)
    def plan_view(request: Request, dag_id: str, failed: str = "", unavailable: str = "") -> str:
        spec, shown = _run_job(dag_id, None)
        plan = _plan(spec, failed, unavailable) if failed else None
        hints = reuse_hints(spec.graph, plan) if plan else {}
        return plan_page(spec, dag_id, plan, hints, _base(request), failed, unavailable, _advice_html(dag_id, spec),
                         shown)

    @app.get("/api/plan/{dag_id}")
    def plan_json(dag_id: str, failed: str, unavailable: str = "") -> dict[str, Any]:
        spec, _ = _run_job(dag_id, None)
        plan = _plan(spec, failed, unavailable)
        return {**plan.to_dict(), "reuse": reuse_hints(spec.graph, plan)}

    @app.get("/api/advise/{dag_id}")
    def advise_json(dag_id: str) -> dict[str, Any]:
        found: dict[str, Any] = _advice(dag_id, _job(dag_id)).to_json()
        return found

    @app.get("/history/{dag_id}/{run_id:path}", response_class=HTMLResponse)
    def history_page(dag_id: str, run_id: str) -> str:
        return _page(_load(dag_id, run_id))

    @app.get("/api/history/{dag_id}/{run_id:path}")
    def history_json(dag_id: str, run_id: str) -> dict[str, Any]:
        return _load(dag_id, run_id).to_json()

    return app
