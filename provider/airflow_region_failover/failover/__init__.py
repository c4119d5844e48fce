"""PURE: *which* subtasks restart (failover strategies), *whether and when* (restart backoff strategies, FLIP-1
budgets), *is this result still available* (the checker protocol), and the decision as a value.

Imports only the standard library and :mod:`airflow_region_failover.graph`.
"""

from airflow_region_failover.failover.availability import AvailabilityChecker, KnownAvailability
from airflow_region_failover.failover.backoff import RestartBackoffStrategy
from airflow_region_failover.failover.budget import BudgetConfig, FailureBudget
from airflow_region_failover.failover.decision import Reason, RegionRestart, RestartDecision
from airflow_region_failover.failover.options import FailoverConfig, parse_options
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.topology import FailoverTopology

__all__ = [
    "AvailabilityChecker",
    "BudgetConfig",
    "FailoverConfig",
    "FailoverTopology",
    "FailureBudget",
    "KnownAvailability",
    "Reason",
    "RegionRestart",
    "RestartBackoffStrategy",
    "RestartDecision",
    "parse_options",
    "plan_restart",
]
