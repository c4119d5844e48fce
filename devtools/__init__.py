"""Repository-only tooling (not part of the wheel): the demo (:mod:`.demo`) and the production-like test stack
(:mod:`.production`: PostgreSQL and Redis from :mod:`.databases`, a Spark standalone cluster from :mod:`.cluster`,
CeleryExecutor and two schedulers), and for the compose stack's test a Docker engine (:mod:`.engine`) and stand-ins
for the images no registry gives here (:mod:`.images`, from the wheels of :mod:`.wheelhouse`). The launchers
``region-failover standalone`` uses live in the package (``airflow_region_failover.standalone``).
"""
