"""The e2e variant of the example ``dags/daily_prices.py``: the same file with its own DAG id and table, and no
schedule, so that the scheduler creates no run of its own (the example, unpaused, would run its latest day at
once) and the test's three logical dates are the only runs publishing to its table. (A start date in the future
does not do: a run whose logical date lies before a task's start date gets no task instances.) Like the example
it runs one date at a time (``max_active_runs=1``), so its publications lie a run apart and each asset event
triggers a run of its own of the consumer DAG (``dags/rf_e2e_daily_consumer.py``): Airflow folds events that
arrive within one scheduler pass into one consumer run."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import E2E_DAGS, LOGICAL_DATE, REPO_ROOT, Prefetch

DAG_ID = "rf_e2e_daily"
TABLE = "rf_e2e_daily_prices"
CONSUMER_DAG = E2E_DAGS / "rf_e2e_daily_consumer.py"
CONSUMER_ID = "rf_e2e_daily_consumer"
DATES = ("2026-01-01", "2026-01-02", "2026-01-03")
FAILING = DATES[1]
PREFETCH: Prefetch = {f"daily-{day}": (DAG_ID, {LOGICAL_DATE: f"{day}T00:00:00Z", "fail_once": day == FAILING})
                      for day in DATES}
"""The runs of the three logical dates, started with the stack (they overlap the first scenarios); in the run of
:data:`FAILING` summary#0 fails on its first try."""
CHANGES = {
    'DAG_ID = "daily_prices"': f'DAG_ID = "{DAG_ID}"',
    'TABLE = "daily_price_summary"': f'TABLE = "{TABLE}"',
    'schedule="@daily",': "schedule=None,",
}


def write_daily_variant(dags: Path) -> Path:
    """Write the variant into the DAGs folder ``dags`` (every change must apply: the example is the source)."""
    text = (REPO_ROOT / "dags" / "daily_prices.py").read_text()
    for old, new in CHANGES.items():
        assert text.count(old) == 1, f"dags/daily_prices.py no longer holds {old!r}: update {__file__}"
        text = text.replace(old, new)
    target = dags / f"{DAG_ID}.py"
    target.write_text(text)
    return target
