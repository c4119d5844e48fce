"""Small region-failover DAGs for the end-to-end tests (one graph, six option sets; ``b`` is declared
``deterministic`` in ``rf_e2e_deterministic`` only; ``c`` has Airflow ``retries=1`` in ``rf_e2e_retries`` only;
``rf_e2e_budget`` stays last, unit tests use it). Scheduled variants: ``RF_E2E_SCHEDULED``, below.

Graph: ``a`` (2) -PIPELINED POINTWISE-> ``b`` (2) -BLOCKING BROADCAST-> ``c`` (2) -BLOCKING POINTWISE-> ``d`` (2),
plus an unconnected ``side`` (1). Regions: {a#0,b#0}, {a#1,b#1}, {c#0}, {c#1}, {d#0}, {d#1}, {side#0}.
``a -> b`` is chained (PIPELINED POINTWISE, 2 = 2): tasks ``a.b.0`` and ``a.b.1`` run ``a#i`` then ``b#i`` in one
Spark session; a failure injected into ``a#i`` or ``b#i`` (names below are subtasks) fails task ``a.b.i``.

Failure injection through run conf (DAG params):
- ``fail``: ``{"c#0": 1}`` — the subtask raises on tries 1..N;
- ``kill``: ``["c#0"]`` — the subtask SIGKILLs its own process on try 1;
- ``hold``: ``["c#0"]`` — the subtask waits at the gate on try 1 (then goes on, without failing);
- ``fail_on``: ``{"2026-02-02": {"c#0": 1}}`` — as ``fail``, only in the run of that logical date (``ds``);
- ``gate``: a directory; a subtask listed in ``fail``/``kill``/``hold`` first writes ``<gate>/<subtask>.started``
  and waits for ``<gate>/go`` (or for every other listed subtask's ``.started`` when ``barrier`` is true), at most
  ``gate_timeout`` s (600; a run started with its stack for a test late in the session waits longer).
"""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import RegionJob

ROWS = 1_000


def _inject(context: Any) -> None:
    params = context.params
    me = str(context.subtask)
    fail = dict(params.get("fail") or {})
    fail.update((params.get("fail_on") or {}).get(str(context.airflow.get("ds")), {}))
    kill = list(params.get("kill") or [])
    hold = list(params.get("hold") or [])
    first = context.try_number == 1
    if context.try_number > int(fail.get(me, 0)) and not (me in kill and first) and not (me in hold and first):
        return
    gate = params.get("gate")
    if gate:
        _wait_at_gate(Path(gate), me, [*fail, *kill, *hold], bool(params.get("barrier")),
                      float(params.get("gate_timeout") or 600.0))
    if me in hold and context.try_number > int(fail.get(me, 0)):
        return
    if me in kill and context.try_number == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"injected failure of {me} on try {context.try_number}")


def _wait_at_gate(gate: Path, me: str, listed: list[str], barrier: bool, timeout: float = 600.0) -> None:
    gate.mkdir(parents=True, exist_ok=True)
    (gate / f"{me}.started").touch()
    deadline = time.time() + timeout
    while time.time() < deadline:
        if barrier and all((gate / f"{s}.started").exists() for s in listed):
            return
        if not barrier and (gate / "go").exists():
            return
        time.sleep(0.1)


def step_a(spark: Any, inputs: Any, context: Any) -> Any:
    _inject(context)
    lo, hi = ROWS * context.index // 2, ROWS * (context.index + 1) // 2
    return spark.range(lo, hi).selectExpr("id", "id % 7 AS k")


def step_b(spark: Any, inputs: Any, context: Any) -> Any:
    _inject(context)
    return inputs["a"].selectExpr("id", "k", "id * 2 AS v")


def step_c(spark: Any, inputs: Any, context: Any) -> Any:
    _inject(context)
    mine = inputs["b"].where(f"k % 2 = {context.index}")
    return mine.groupBy("k").agg({"v": "sum", "id": "count"}).withColumnRenamed("sum(v)", "total") \
        .withColumnRenamed("count(id)", "n")


def step_d(spark: Any, inputs: Any, context: Any) -> Any:
    _inject(context)
    return inputs["c"].selectExpr("k", "total", "n", "total / n AS mean")


def step_side(spark: Any, inputs: Any, context: Any) -> Any:
    _inject(context)
    return spark.range(0, 10).selectExpr("id AS x")


def expected_d() -> dict[int, tuple[int, int]]:
    """``k -> (total, n)`` computed directly in Python."""
    out: dict[int, tuple[int, int]] = {}
    for i in range(ROWS):
        total, n = out.get(i % 7, (0, 0))
        out[i % 7] = (total + 2 * i, n + 1)
    return out


OPTION_SETS = {
    "rf_e2e_retries": {"jobmanager.execution.failover-strategy": "region", "restart-strategy.type": "fixed-delay",
                       "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "1 s"},
    "rf_e2e_region": {"jobmanager.execution.failover-strategy": "region", "restart-strategy.type": "fixed-delay",
                      "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "1 s"},
    "rf_e2e_full": {"jobmanager.execution.failover-strategy": "full", "restart-strategy.type": "fixed-delay",
                    "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "1 s"},
    "rf_e2e_delayed": {"jobmanager.execution.failover-strategy": "region", "restart-strategy.type": "fixed-delay",
                       "restart-strategy.fixed-delay.attempts": "3", "restart-strategy.fixed-delay.delay": "60 s"},
    "rf_e2e_deterministic": {"jobmanager.execution.failover-strategy": "region",
                             "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                             "restart-strategy.fixed-delay.delay": "1 s"},
    "rf_e2e_budget": {"jobmanager.execution.failover-strategy": "region", "restart-strategy.type": "fixed-delay",
                      "restart-strategy.fixed-delay.attempts": "1", "restart-strategy.fixed-delay.delay": "0 s"},
}

PARAMS = {"fail": Param({}, type="object"), "fail_on": Param({}, type="object"),
          "kill": Param([], type="array"), "hold": Param([], type="array"),
          "gate": Param("", type="string"), "barrier": Param(False, type="boolean"),
          "gate_timeout": Param(600, type="number")}
#: Airflow's own retries on step ``c`` (``rf_e2e_retries``): a failed try is retried by Airflow, not failed over.
C_TASK_KWARGS = {"rf_e2e_retries": {"retries": 1, "retry_delay": timedelta(seconds=1)}}


def build(dag_id: str, options: dict[str, str], **dag_kwargs: Any) -> DAG:
    """One e2e DAG of the graph above (``dag_kwargs`` override schedule, start date, catch-up, params)."""
    kwargs = {"schedule": None, "start_date": datetime(2026, 1, 1), "catchup": False, "params": PARAMS,
              **dag_kwargs}
    with DAG(dag_id=dag_id, tags=["region-failover", "e2e"], **kwargs) as dag:
        job = RegionJob(options=options)
        job.step("a", step_a, parallelism=2)
        job.step("b", step_b, parallelism=2, deterministic=dag_id == "rf_e2e_deterministic")
        job.step("c", step_c, parallelism=2, **C_TASK_KWARGS.get(dag_id, {}))
        job.step("d", step_d, parallelism=2)
        job.step("side", step_side)
        job.edge("a", "b", exchange="PIPELINED", distribution="POINTWISE")
        job.edge("b", "c", exchange="BLOCKING", distribution="BROADCAST")
        job.edge("c", "d", exchange="BLOCKING", distribution="POINTWISE")
        job.render()
    return dag


#: Scheduled variants, only where ``RF_E2E_SCHEDULED`` is set (the production-like stack: on the embedded stack
#: their runs would compete with every scenario there). Both are paused at creation: their tests unpause them, so
#: their runs do not compete with the other scenarios either. ``rf_e2e_daily``: ``@daily`` with catch-up from
#: yesterday — two scheduled runs at once (Airflow 3's cron timetable runs at each midnight, today's included) —
#: its second day's c#0 failing once. ``rf_e2e_backfill``: ``@daily`` ending 2026-02-03 without catch-up, so the
#: scheduler creates no run of its own and only a backfill of past dates runs it.
DAILY_RUNS = 2
DAILY_START = (datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
               - timedelta(days=DAILY_RUNS - 1))
DAILY_FAILING_DAY = (DAILY_START + timedelta(days=1)).strftime("%Y-%m-%d")
BACKFILL_END = datetime(2026, 2, 3, tzinfo=timezone.utc)
if os.environ.get("RF_E2E_SCHEDULED"):
    daily = build("rf_e2e_daily", OPTION_SETS["rf_e2e_region"], schedule="@daily", start_date=DAILY_START,
                  catchup=True, max_active_runs=3, is_paused_upon_creation=True,
                  params={**PARAMS, "fail_on": Param({DAILY_FAILING_DAY: {"c#0": 1}}, type="object")})
    backfill = build("rf_e2e_backfill", OPTION_SETS["rf_e2e_region"], schedule="@daily",
                     start_date=datetime(2026, 1, 1, tzinfo=timezone.utc), end_date=BACKFILL_END, catchup=False,
                     max_active_runs=3, is_paused_upon_creation=True)

for _dag_id, _options in OPTION_SETS.items():  # rf_e2e_budget last: unit tests take ``_dag``
    _dag = build(_dag_id, _options)
