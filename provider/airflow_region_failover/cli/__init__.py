"""``region-failover`` (also ``python -m airflow_region_failover``): look at regions, preview decisions, read a
run's failover history and collect the store's garbage. :func:`~.main.main` is the entry point."""

from airflow_region_failover.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
