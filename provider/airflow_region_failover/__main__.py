"""``python -m airflow_region_failover``: the ``region-failover`` command line."""

from airflow_region_failover.cli import main

raise SystemExit(main())
