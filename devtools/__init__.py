"""Repository-only tooling (not part of the wheel): local servers for the demo, the tests and the benchmarks.

:mod:`.seaweedfs` (a real S3 server), :mod:`.spark_connect` (a Spark Connect server), :mod:`.airflow_stack`
(Airflow 3 on SQLite + LocalExecutor), :mod:`.processes` (free ports, process groups) and :mod:`.demo`.
"""
