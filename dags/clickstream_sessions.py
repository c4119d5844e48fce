"""Sessionising a week of click events with a checkpointed step (docs/user/checkpoints.md)::

    clicks#0 ==keyed by user==+==> sessions#0  (checkpointed: one epoch per day, open sessions as state)
                              \\=> sessions#1

``clicks`` (1 subtask) writes a week of click events ``(user, ts)``, day by day: one Spark partition per day, so
each ``sessions`` subtask reads its users' events as one object per day, in day order. ``sessions`` (2 subtasks,
``Checkpoint(epochs=DAYS)``) is called once per day with that day's clicks and the sessions still open at the end
of the previous day (its *state*, one row per user); a session closes after ``GAP_S`` seconds without a click, and
the closed sessions of the day are its output. After each day a checkpoint stores what changed in the open
sessions (incrementally) and the day's output; if the task fails on day 5, its next try restores the checkpoint of
day 4 and computes only days 5 and 6 — its log says so (``resumed from checkpoint ...``), and so does the run's
failover view. The DAG param ``fail_at_epoch`` (``-1``: never) makes ``sessions#0`` fail on its first try in that
epoch (day), after the checkpoints of the days before it; region failover restarts it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from airflow.sdk import DAG, Param

from airflow_region_failover import Checkpoint, RegionJob

DAG_ID = "clickstream_sessions"
DAYS = 7
USERS = 400
EVENTS_PER_DAY = 4_000
GAP_S = 30 * 60
DAY_S = 86_400
STATE = "user long, start long, last long, clicks long"


def event(i: int) -> tuple[int, int]:
    """Click ``i`` of the week: its user and time (s since the week began); day ``i // EVENTS_PER_DAY``."""
    day = i // EVENTS_PER_DAY
    return (i * 7919) % USERS, day * DAY_S + (i * 104_729) % DAY_S


def clicks(spark: Any, inputs: Any, context: Any) -> Any:
    """The week's clicks (:func:`event`), one Spark partition per day in day order."""
    from pyspark.sql import functions as F

    ids = spark.range(0, DAYS * EVENTS_PER_DAY, numPartitions=DAYS)
    day = (F.col("id") / EVENTS_PER_DAY).cast("long")
    return ids.select(((F.col("id") * 7919) % USERS).alias("user"),
                      (day * DAY_S + (F.col("id") * 104_729) % DAY_S).alias("ts"))


def sessionize(spark: Any, inputs: Any, state: Any, context: Any) -> Any:
    """One day: the open sessions (``state``) and the day's clicks, cut into sessions at gaps over ``GAP_S``;
    sessions whose last click lies more than ``GAP_S`` before the day's last click are closed (the output), the
    others stay open (the new state). On the last day every session closes."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    epoch = context.epoch
    if epoch.index == int(context.params.get("fail_at_epoch", -1)) and context.try_number == 1 \
            and context.index == 0:
        raise RuntimeError(f"injected failure of {context.subtask} in epoch {epoch.index} (day {epoch.index})")
    day = inputs["clicks"]
    events = day.select("user", F.col("ts").alias("start"), F.col("ts").alias("last"), F.lit(1).cast("long")
                        .alias("clicks"))
    rows = state.unionByName(events)
    order = Window.partitionBy("user").orderBy("start", "last")
    previous = F.max("last").over(order.rowsBetween(Window.unboundedPreceding, -1))
    starts = (previous.isNull() | (F.col("start") - previous > GAP_S)).cast("long")
    numbered = rows.withColumn("session", F.sum(starts).over(order))
    sessions = numbered.groupBy("user", "session").agg(F.min("start").alias("start"), F.max("last").alias("last"),
                                                       F.sum("clicks").alias("clicks"))
    watermark = day.agg(F.max("ts")).first()[0]
    if epoch.last:
        closed = F.lit(True)
    elif watermark is None:
        closed = F.lit(False)
    else:
        closed = F.col("last") < F.lit(watermark - GAP_S)
    done = sessions.where(closed).select("user", "start", F.col("last").alias("end"), "clicks")
    return done, sessions.where(~closed).select("user", "start", "last", "clicks")


def reference_sessions() -> list[tuple[int, int, int, int]]:
    """The week's sessions computed without Spark: ``(user, start, end, clicks)``, sorted (what the DAG must
    produce, whatever failed on the way)."""
    by_user: dict[int, list[int]] = {}
    for i in range(DAYS * EVENTS_PER_DAY):
        user, ts = event(i)
        by_user.setdefault(user, []).append(ts)
    sessions = []
    for user, times in by_user.items():
        times.sort()
        start = last = times[0]
        count = 1
        for ts in times[1:]:
            if ts - last > GAP_S:
                sessions.append((user, start, last, count))
                start, count = ts, 0
            last = ts
            count += 1
        sessions.append((user, start, last, count))
    return sorted(sessions)


with DAG(
    DAG_ID,
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"fail_at_epoch": Param(-1, type="integer", title="Make sessions#0 fail on its first try in this epoch "
                                   "(day); -1: never")},
    tags=["region-failover", "example", "checkpoints"],
):
    job = RegionJob(restart_strategy="fixed-delay", options={"restart-strategy.fixed-delay.attempts": "2",
                                                             "restart-strategy.fixed-delay.delay": "1 s",
                                                             "state.checkpoints.num-retained": "2"})
    job.step("clicks", clicks)
    job.step("sessions", sessionize, parallelism=2,
             checkpoint=Checkpoint(state_key=["user"], state_schema=STATE, epochs=DAYS))
    job.edge("clicks", "sessions", exchange="BLOCKING", partition_by=["user"])
    job.render()
