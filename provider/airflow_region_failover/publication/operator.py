"""The publishing operator: after every subtask of a sink step succeeded, one Airflow task commits the sink
result to its Delta table, exactly once per run (:mod:`.declaration` says which table, mode and application
transaction; :mod:`.delta` how it is staged and committed).

Rules: the task reads the *current committed* version of every partition of the sink result from the result
store; its identity comes from the DAG run (logical date, data interval end, ``run_after``, run id), never from
the try, so an Airflow retry, a clear of the task, of the sink step or of the whole run publishes nothing twice.
It lies outside the region groups and restarts with its sink's subtasks when region failover restarts them
(:meth:`~airflow_region_failover.job.JobSpec.followers`); its own failure (S3 away, schema refused) is retried by
Airflow (``retries``, default 2), not by region failover. The table root is ``[region_failover] publish_root``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_region_failover import conf
from airflow_region_failover.publication import delta as tables
from airflow_region_failover.publication.declaration import (
    Publication,
    RunTimes,
    default_root,
    table_uri,
    transaction_of,
)
from airflow_region_failover.store.config import StoreConfig
from airflow_region_failover.store.facade import default_store

if TYPE_CHECKING:
    from airflow.sdk import Context

DEFAULT_RETRIES = 2


def publish_root(config: StoreConfig) -> str:
    """``[region_failover] publish_root``, or ``s3://<store bucket>/<store prefix>/tables`` when unset."""
    return conf.publish_root() or default_root(config.bucket, config.prefix)


def run_times(context: Context) -> RunTimes:
    """What identifies the task's DAG run for publishing (its ids and dates)."""
    run = context["dag_run"]
    return RunTimes(run.dag_id, run.run_id, getattr(run, "logical_date", None),
                    getattr(run, "data_interval_end", None), getattr(run, "run_after", None))


class RegionPublishOperator(BaseOperator):  # type: ignore[misc]
    """Publish step ``publication.step``'s sink result (``partitions`` partitions) to ``publication.table``."""

    ui_color = "#9fc5e8"
    ui_fgcolor = "#000000"

    def __init__(self, *, publication: Publication, partitions: int, **kwargs: Any) -> None:
        dag = kwargs.get("dag")
        default_args = getattr(dag, "default_args", None) or {}
        kwargs.setdefault("retries", default_args.get("retries", DEFAULT_RETRIES))
        super().__init__(**kwargs)
        self.publication = publication
        self.partitions = partitions
        self.doc_md = (f"Publishes the sink result of step `{publication.step}` ({partitions} partitions) to Delta "
                       f"table `{publication.table}` ({publication.mode.value}), once per run.")

    def execute(self, context: Context) -> dict[str, Any]:
        """Publish (or find it published); returns what was done (Airflow stores it as the return value)."""
        run = run_times(context)
        txn = transaction_of(self.publication, run)
        store = default_store()
        uri = table_uri(publish_root(store.config), self.publication.table)
        target = tables.target_for(uri, store.config.access)
        outcome = tables.publish(store, run.dag_id, run.run_id, self.publication.step, self.partitions, target, txn,
                                 {"region_failover.step": self.publication.step})
        if outcome.committed:
            self.log.info("published %d rows (%d files, %d bytes) of %s to %s as table version %s (%s, txn %s=%d)",
                          outcome.rows, outcome.files, outcome.bytes, self.publication.step, uri, outcome.version,
                          self.publication.mode.value, txn.app_id, txn.version)
        else:
            self.log.info("not published again to %s (table version %s): %s", uri, outcome.version, outcome.reason)
        return {"table": uri, "committed": outcome.committed, "version": outcome.version, "rows": outcome.rows,
                "run_key": txn.run_key}
