"""airflow-provider-region-failover: Flink-style region failover for PySpark pipelines on Apache Airflow 3.

Importing this package is cheap and pure: the core (``graph``, ``failover``) needs only the standard library, so
the CLI runs without Airflow, boto3 or pyspark. The Airflow-facing names are resolved lazily on first access.
``docs/contributing/architecture.md`` in the repository describes every package.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

from airflow_region_failover.failover.checkpointing import Checkpoint
from airflow_region_failover.graph import (
    Distribution,
    Edge,
    Exchange,
    GraphError,
    JobGraph,
    JobGraphBuilder,
    OptionError,
    PartitionId,
    Step,
    SubtaskId,
)
from airflow_region_failover.graph.auto import PER_RUN
from airflow_region_failover.planning.policy import PlannerPolicy

# name -> module that defines it; imported on first access (these modules import Airflow / pyspark / boto3).
_LAZY: dict[str, str] = {
    "RegionJob": "airflow_region_failover.authoring",
    "StepContext": "airflow_region_failover.spark.context",
    "RegionStepOperator": "airflow_region_failover.operators.step",
    "run_script_step": "airflow_region_failover.spark.submit",
    "task_id_of": "airflow_region_failover.naming",
    "subtask_of": "airflow_region_failover.naming",
    "job_of": "airflow_region_failover.job",
    "published_table": "airflow_region_failover.publication.operator",
}

__all__ = [
    "Checkpoint",
    "Distribution",
    "Edge",
    "Exchange",
    "GraphError",
    "JobGraph",
    "JobGraphBuilder",
    "OptionError",
    "PER_RUN",
    "PartitionId",
    "PlannerPolicy",
    "Step",
    "SubtaskId",
    "__version__",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
