"""Repository-only tooling (not part of the wheel): the demo (:mod:`.demo`) and the production-like test stack
(:mod:`.production`: PostgreSQL and Redis from :mod:`.databases`, a Spark standalone cluster from :mod:`.cluster`,
CeleryExecutor and two schedulers). The launchers ``region-failover standalone`` uses live in the package
(``airflow_region_failover.standalone``).
"""
