"""What a task and a restart report to the outside: metrics (:mod:`.metrics`, StatsD through Airflow's Stats) and
OpenLineage datasets (:mod:`.lineage`), both derived from the task's ledger (:mod:`~..spark.ledger`), so the two
always say the same. Imported by the step operator, the plugin (decision metrics) and ``region-failover gc``
(dropped partitions)."""
