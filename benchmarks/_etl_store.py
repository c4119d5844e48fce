"""What a run of the example ETL committed: its bytes per result and its report's rows (``bench_etl_compare.py``,
``bench_breakdown.py``, ``bench_chaos.py``)."""

from __future__ import annotations

from typing import Any


def committed_bytes(store: Any, dag_id: str, run_id: str) -> tuple[int, dict[str, int]]:
    """Bytes of every current manifest of the run (total and per result), plus the Parquet files the ``"s3a"``
    variant of (b) wrote through ``s3a://`` (per step, under ``s3a:<step>``)."""
    from etl_plain_airflow import s3a_url  # the (b) template's own layout (importing it builds its DAG object)

    keys = store.run_keys(dag_id, run_id)
    per_result: dict[str, int] = {}
    s3a_dir = s3a_url(store.config.bucket, dag_id, run_id, "").split("/", 3)[3]
    for page in store.objects.client.get_paginator("list_objects_v2").paginate(Bucket=store.config.bucket,
                                                                                 Prefix=s3a_dir):
        for item in page.get("Contents", []):  # beside the store's layout: its own client, no layout check
            step = item["Key"][len(s3a_dir):].split("/", 1)[0]
            if item["Key"].endswith(".parquet"):
                per_result[f"s3a:{step}"] = per_result.get(f"s3a:{step}", 0) + int(item["Size"])
    for prefix in store.objects.list_dirs(keys.run_prefix):
        part = prefix[len(keys.run_prefix):].rstrip("/")
        if part.startswith("_"):
            continue
        result = part.replace(".to.", "->")  # inverse of graph.ids.key_part
        for partition in store.partitions(dag_id, run_id, result):
            per_result[result] = per_result.get(result, 0) + store.manifest(dag_id, run_id, partition).total_bytes
    return sum(per_result.values()), per_result


def report_rows(store: Any, dag_id: str, run_id: str) -> list[tuple[Any, ...]]:
    """The committed report (partition ``report#0``) as sorted rows, for the cross-check."""
    from airflow_region_failover.graph.ids import PartitionId

    table = store.read_arrow(store.manifest(dag_id, run_id, PartitionId("report", 0)))
    cols = ["c_mktsegment", "year", "revenue", "orders", "customers"]
    return sorted(zip(*(table.column(c).to_pylist() for c in cols), strict=True))
