"""PURE: *which* subtasks restart (failover strategies, :mod:`.planner`), *whether and when* (restart backoff
strategies, :mod:`.backoff`; FLIP-1 budgets, :mod:`.budget`), *is this result still available* (the checker
protocol, :mod:`.availability`), the options that configure them (:mod:`.options`), and the failure handler that
turns one failure into a recorded decision (:mod:`.handler`).

Imports only the standard library and :mod:`airflow_region_failover.graph`.
"""

from airflow_region_failover.failover.availability import AvailabilityChecker, KnownAvailability
from airflow_region_failover.failover.backoff import RestartBackoffStrategy
from airflow_region_failover.failover.budget import BudgetConfig, FailureBudget
from airflow_region_failover.failover.options import FailoverConfig, FailoverStrategy, parse_options
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.restart_plan import Reason, RegionRestart, RestartPlan
from airflow_region_failover.failover.topology import FailoverTopology

__all__ = [
    "AvailabilityChecker",
    "BudgetConfig",
    "FailoverConfig",
    "FailoverStrategy",
    "FailoverTopology",
    "FailureBudget",
    "KnownAvailability",
    "Reason",
    "RegionRestart",
    "RestartBackoffStrategy",
    "RestartPlan",
    "parse_options",
    "plan_restart",
]
