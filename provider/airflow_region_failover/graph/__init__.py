"""PURE: the job graph model, its validation and JSON format, subtask expansion and failover regions.

Imports nothing but the standard library.
"""

from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.graph.errors import GraphError, OptionError, RegionFailoverError
from airflow_region_failover.graph.ids import PartitionId, SubtaskId
from airflow_region_failover.graph.model import Distribution, Edge, Exchange, JobGraph, Result, Step

__all__ = [
    "Distribution",
    "Edge",
    "Exchange",
    "GraphError",
    "JobGraph",
    "JobGraphBuilder",
    "OptionError",
    "PartitionId",
    "RegionFailoverError",
    "Result",
    "Step",
    "SubtaskId",
]
