"""Rendering: a job graph becomes Airflow tasks, one TaskGroup per failover region and one task per subtask."""

from airflow_region_failover.rendering.task_groups import RenderedJob, render_job

__all__ = ["RenderedJob", "render_job"]
