"""Where what a failed try of a fused task measured before it failed is kept, for the planner's run history.

Rules:

* a fused task runs its members one after another in one Spark session, and Spark runs a member's work in the job
  of the commit that reads it: when a try fails, the members up to its last commit were measured by the task's
  clock at that commit. The try (:mod:`~airflow_region_failover.spark.fused`) keeps a task summary of those members
  — its JSON form, with the timeline as of that commit — as one object,
  ``<prefix>/failover/v1/runs/<dag>/<run>/tries/<task>/<try>.json`` (:meth:`~..store.keys.Layout.failed_try`),
  beside the run's decision log: outside the results' tree, so the sweeper never takes it, and through the guarded
  objects layer, so no key leaves the configured bucket and prefix. A try that committed nothing keeps nothing;
* keeping is best effort: a failure is logged and never raised over the try's own error;
* the run history (:mod:`~airflow_region_failover.plugins.run_history`) reads them back (at most
  :data:`MAX_TRIES` per run; an unreadable one is skipped with a warning): a member a later try kept was measured
  by the failed try that committed it, so a job whose every run fails late is still measured.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from airflow_region_failover.exceptions import RegionFailoverError
from airflow_region_failover.store.key_checks import decode_airflow_id
from airflow_region_failover.store.s3.objects import Objects

log = logging.getLogger(__name__)
MAX_TRIES = 200
"""The most failed-try records read for one run."""


class FailedTries:
    """The failed-try records of the runs under one store (module rules)."""

    def __init__(self, objects: Objects) -> None:
        self.objects = objects

    def keep(self, dag_id: str, run_id: str, task_id: str, try_number: int, summary: Mapping[str, Any]) -> None:
        """Keep ``summary`` (a task summary's JSON form) for try ``try_number`` of ``task_id``; never raises."""
        try:
            key = self.objects.layout.failed_try(dag_id, run_id, task_id, try_number)
            self.objects.put(key, json.dumps(summary, sort_keys=True).encode())
        except Exception:  # the try's own error is what its task must report
            log.warning("region failover: could not keep what failed try %d of %s measured", try_number, task_id,
                        exc_info=True)

    def of_run(self, dag_id: str, run_id: str) -> dict[str, list[dict[str, Any]]]:
        """Task id -> the JSON forms its failed tries kept, in key order (module rules)."""
        found: dict[str, list[dict[str, Any]]] = {}
        for n, listed in enumerate(self.objects.listing(self.objects.layout.failed_tries(dag_id, run_id))):
            if n >= MAX_TRIES:
                log.warning("region failover: %s/%s has more than %d failed-try records; the rest are not read",
                            dag_id, run_id, MAX_TRIES)
                break
            try:
                body = self.objects.get(listed.key)
                parsed = json.loads(body) if body is not None else None
            except (RegionFailoverError, ValueError):
                log.warning("region failover: the failed-try record %s cannot be read; skipped", listed.key,
                            exc_info=True)
                continue
            if isinstance(parsed, dict):
                found.setdefault(decode_airflow_id(listed.key.rsplit("/", 2)[-2]), []).append(parsed)
        return found
