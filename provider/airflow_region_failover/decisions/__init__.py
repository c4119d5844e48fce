"""Where a run's failover decision log lives: one JSON object per DAG run in S3, changed only by compare-and-swap,
with its pending markers and holds (:mod:`.storage`). The log itself — its typed records and pure transitions — is
:mod:`~airflow_region_failover.failover.run_log` and :mod:`~airflow_region_failover.failover.handler`."""
