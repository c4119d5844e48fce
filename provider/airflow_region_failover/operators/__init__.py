"""Operators: the step operator that runs one subtask of a job graph as one Airflow task."""

from airflow_region_failover.operators.step import RegionStepOperator

__all__ = ["RegionStepOperator"]
