"""Baseline (b) of bench_etl_compare.py: the example ETL as plain Airflow, one ``@task.pyspark`` task per step.

A template: ``bench_etl_compare.py`` copies it into its stack's DAGs folder with ``DAG_ID``, ``ETL_SOURCE``,
``ORDERS`` and ``CUSTOMERS`` replaced (one copy per size). It runs the very functions of ``dags/tpch_etl.py``
(everything above its ``with DAG(`` block, executed with the size constants replaced, no DAG built) as a user
would write the pipeline without region failover:

* one task per step (gen_customer, gen_orders, gen_lineitem, clean_orders, clean_lineitem, join, aggregate,
  report), each a ``@task.pyspark`` task on the Spark Connect connection, ``retries=1``, ``retry_delay`` 1 s (the
  region-failover DAG's fixed-delay backoff is 1 s too);
* every task persists its whole output as Parquet in the same SeaweedFS bucket and reads its inputs whole,
  parallelism 1 per step, no keyed exchange, in one of two ways (``PERSIST``):

  - ``"s3a"`` (what a Spark user writes): Spark's own ``df.write.mode("overwrite").parquet("s3a://...")`` with
    S3A's default committer, and ``spark.read.parquet`` back, under ``bench-plain-s3a/<dag>/<run>/<step>``
    of the store's bucket (:func:`s3a_url`; the benchmark's own bucket, outside the store's layout); the final
    report goes through ``ResultStore.write`` as (a)'s does, for the benchmark's cross-check of the reports;
  - ``"store"``: the provider's ``ResultStore.write`` / ``ResultStore.read`` (the region-failover steps' own
    writer and reader), under result ``<step>`` partition 0, attempt = try;
* DAG param ``fail_once``: ``aggregate`` raises on its first try, as it starts (``FAIL_AT = "start"``) or at the
  end of its job, after its aggregation ran (``"end"``: a UDF on its output, as (a)'s failure); Airflow retries only
  that task (its inputs are committed, so that is correct here); DAG param ``salt``: the generators' key salt (as
  ``dags/tpch_etl.py``'s).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_region_failover.store.keys import AttemptId

DAG_ID = "etl_plain_airflow"
ETL_SOURCE = str(Path(__file__).resolve().parents[1] / "dags" / "tpch_etl.py")
ORDERS = 20_000
CUSTOMERS = 2_000
SPARK_CONN_ID = "region_failover_spark"
PERSIST = "store"
FAIL_AT = "start"
S3A_DIR = "bench-plain-s3a"


def etl_functions(source: str, orders: int, customers: int) -> dict[str, Any]:
    """The module namespace of ``source`` above its DAG block (no Airflow import), sized to ``orders``."""
    head = Path(source).read_text().split("\nwith DAG(", 1)[0]
    head = re.sub(r"^from airflow\S* import [^\n]*$", "", head, flags=re.M)
    namespace: dict[str, Any] = {"__name__": "tpch_etl_functions"}
    exec(compile(head, source, "exec"), namespace)  # the repository's own DAG code
    namespace.update(ORDERS=orders, CUSTOMERS=customers)
    return namespace


ETL = etl_functions(ETL_SOURCE, ORDERS, CUSTOMERS)


def _store() -> Any:
    from airflow_region_failover.store.result_store import ResultStore

    return ResultStore.from_airflow()


def s3a_url(bucket: str, dag_id: str, run_id: str, step: str) -> str:
    """Where the ``"s3a"`` variant keeps ``step``'s output: a directory of the store's bucket beside the store's
    prefix (the run id's ``:`` and ``+`` made path-safe for Hadoop)."""
    run = re.sub(r"[^A-Za-z0-9._-]", "_", run_id)
    return f"s3a://{bucket}/{S3A_DIR}/{dag_id}/{run}/{step}"


def _s3a(step: str, context: Any) -> tuple[str, dict[str, str]]:
    from airflow_region_failover.store.dataplane import s3a

    store, ti = _store(), context["ti"]
    options = s3a.hadoop_options(store.config.access, s3a.Mode.AUTO)
    if options is None:
        raise RuntimeError("the s3a variant needs long-lived keys on the store's connection")
    return s3a_url(store.config.bucket, ti.dag_id, ti.run_id, step), options


def _save(df: Any, step: str, context: Any) -> int:
    from airflow_region_failover.graph.ids import PartitionId

    ti = context["ti"]
    if PERSIST == "s3a" and step != "report":
        url, options = _s3a(step, context)
        df.write.options(**options).mode("overwrite").parquet(url)
        return 0
    manifest, _ = _store().write(df, AttemptId(ti.dag_id, ti.run_id, PartitionId(step, 0), int(ti.try_number)))
    return int(manifest.total_bytes)


def _salt(context: Any) -> int:
    return int(context["params"].get("salt") or 0)


def _fail_at_end(df: Any) -> Any:
    """``df`` failing when its job computes it (after the aggregation ran), as (a)'s injected failure does."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType

    def boom(year: int) -> int:
        raise RuntimeError("injected failure: fail_once fails aggregate's job at its end on its first try")

    return df.withColumn("year", F.udf(boom, IntegerType()).asNondeterministic()(F.col("year")))


def _load(spark: Any, step: str, context: Any) -> Any:
    from airflow_region_failover.graph.ids import PartitionId

    ti = context["ti"]
    if PERSIST == "s3a":
        url, options = _s3a(step, context)
        return spark.read.options(**options).parquet(url)
    return _store().read(spark, ti.dag_id, ti.run_id, PartitionId(step, 0))


with DAG(
    dag_id=DAG_ID,
    description="bench_etl_compare baseline (b): the example ETL as plain Airflow, one task per step",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["benchmark"],
    params={"fail_once": Param(False, type="boolean"), "salt": Param(0, type="integer")},
    default_args={"retries": 1, "retry_delay": timedelta(seconds=1)},
):
    @task.pyspark(conn_id=SPARK_CONN_ID)
    def gen_customer(spark: Any = None, **context: Any) -> int:
        return _save(ETL["customers"](spark, 0, CUSTOMERS, _salt(context)), "gen_customer", context)

    @task.pyspark(conn_id=SPARK_CONN_ID)
    def gen_orders(spark: Any = None, **context: Any) -> int:
        return _save(ETL["orders"](spark, 0, ORDERS, _salt(context)), "gen_orders", context)

    @task.pyspark(conn_id=SPARK_CONN_ID)
    def gen_lineitem(spark: Any = None, **context: Any) -> int:
        return _save(ETL["lineitems"](spark, 0, ORDERS, _salt(context)), "gen_lineitem", context)

    @task.pyspark(conn_id=SPARK_CONN_ID)
    def clean_orders(spark: Any = None, **context: Any) -> int:
        return _save(ETL["clean_orders"](_load(spark, "gen_orders", context)), "clean_orders", context)

    @task.pyspark(conn_id=SPARK_CONN_ID)
    def clean_lineitem(spark: Any = None, **context: Any) -> int:
        return _save(ETL["clean_lineitems"](_load(spark, "gen_lineitem", context)), "clean_lineitem", context)

    @task.pyspark(conn_id=SPARK_CONN_ID)
    def join(spark: Any = None, **context: Any) -> int:
        joined = ETL["join"](_load(spark, "gen_customer", context), _load(spark, "clean_orders", context),
                             _load(spark, "clean_lineitem", context))
        return _save(ETL["local_aggregate"](joined), "join", context)

    @task.pyspark(conn_id=SPARK_CONN_ID)
    def aggregate(spark: Any = None, **context: Any) -> int:
        fail = context["params"].get("fail_once") and int(context["ti"].try_number) == 1
        if fail and FAIL_AT == "start":
            raise RuntimeError("injected failure: fail_once fails aggregate on its first try")
        out = ETL["aggregate"](_load(spark, "join", context))
        return _save(_fail_at_end(out) if fail else out, "aggregate", context)

    @task.pyspark(conn_id=SPARK_CONN_ID)
    def report(spark: Any = None, **context: Any) -> int:
        return _save(ETL["report"](_load(spark, "aggregate", context)), "report", context)

    customers_t, orders_t, lineitem_t = gen_customer(), gen_orders(), gen_lineitem()
    clean_o, clean_l = clean_orders(), clean_lineitem()
    joined_t, aggregated_t, report_t = join(), aggregate(), report()
    orders_t >> clean_o
    lineitem_t >> clean_l
    [customers_t, clean_o, clean_l] >> joined_t >> aggregated_t >> report_t
