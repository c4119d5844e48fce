"""End-to-end support shared by the stacks: what a test sees of a running stack (:class:`E2E`).

One stack per sub-package, each started once for the tests of its package and stopped after them (so they never
run at the same time): ``local/`` — the embedded stack of ``region-failover standalone`` (SQLite,
LocalExecutor) —, ``faults/`` — the same behind the test's S3 fault proxy — and ``cluster/`` — the production-like
stack (PostgreSQL, Redis, CeleryExecutor, two schedulers, a Spark standalone cluster). Everything runs on
loopback; docs/contributing/testing.md says which scenario runs where.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_region_failover.plugins.rest import FAILED_GRACE_S
from airflow_region_failover.standalone.airflow_stack import AirflowStack

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_DAGS = Path(__file__).parent / "dags"
#: scenario name -> (dag id, run conf)
Prefetch = dict[str, tuple[str, dict[str, Any]]]
#: a prefetched run conf's ``gate``: replaced by that scenario's own gate directory (:meth:`E2E.gate`)
GATE = "<gate>"
#: a prefetched run conf's key giving the run's logical date (ISO 8601); not part of the run's conf
LOGICAL_DATE = "<logical_date>"


def wanted(session: pytest.Session, package: Path) -> set[str]:
    """The scenario names the selected tests of ``package`` give with ``@pytest.mark.prefetch(name, ...)``: a
    scenario whose tests are deselected (``-m``, ``-k``) is not started, so it takes no worker slot."""
    return {name for item in session.items if item.path.is_relative_to(package)
            for mark in item.iter_markers("prefetch") for name in mark.args}


def selected(table: Prefetch, names: set[str], known: Collection[str] = ()) -> Prefetch:
    """The entries of ``table`` named in ``names``; a name neither in ``table`` nor ``known`` is a usage error."""
    unknown = names - set(table) - set(known)
    if unknown:
        raise pytest.UsageError(f"@pytest.mark.prefetch names {sorted(unknown)}: no such scenario")
    return {name: entry for name, entry in table.items() if name in names}


@dataclass
class E2E:
    """What a test needs: the stack, a REST client, the result store, the decision logs, the S3 server process and
    the DAGs folder."""

    stack: AirflowStack
    api: Any
    store: Any
    logs: Any
    s3: Any = None
    dags: Path | None = None
    #: independent scenarios triggered together by the first test needing one (their waits overlap)
    table: Prefetch = field(default_factory=dict)
    prefetched: dict[str, str] = field(default_factory=dict)
    #: where the prefetched scenarios' gate directories are made (:data:`GATE`)
    gates: Path | None = None
    #: the watcher process beside the scheduler's (the embedded stack's second watcher), to stop and start again
    second_watcher: Any = None

    def prefetch(self) -> None:
        """Trigger every scenario of :attr:`table` now (a ``gate`` of :data:`GATE` becomes its own directory)."""
        for name, (dag_id, conf) in self.table.items():
            if conf.get("gate") == GATE:
                conf = {**conf, "gate": str(self.gate(name))}
            logical_date = conf.get(LOGICAL_DATE)
            conf = {k: v for k, v in conf.items() if k != LOGICAL_DATE}
            self.prefetched[name] = self.api.trigger(dag_id, conf, logical_date=logical_date)

    def gate(self, name: str) -> Path:
        """The gate directory of prefetched scenario ``name`` (its run conf's ``gate`` was :data:`GATE`)."""
        if self.gates is None:
            raise RuntimeError("this stack's E2E has no gates directory")
        return self.gates / name

    def started(self, name: str) -> tuple[str, str]:
        """``(dag_id, run_id)`` of a prefetched scenario, at once (see :meth:`finished`)."""
        if name not in self.prefetched:
            raise RuntimeError(f"scenario {name!r} was not prefetched: mark the test @pytest.mark.prefetch({name!r})")
        return self.table[name][0], self.prefetched[name]

    def finished(self, name: str, timeout: float = 900.0) -> tuple[str, str, str]:
        """``(dag_id, run_id, state)`` of a prefetched scenario once its run has ended (the stack's fixture
        triggers the selected scenarios with :meth:`prefetch` when it is up)."""
        dag_id, run_id = self.started(name)
        return dag_id, run_id, self.final_state(dag_id, run_id, timeout)

    def run(self, dag_id: str, conf: dict[str, Any] | None = None, timeout: float = 900.0) -> tuple[str, str]:
        """Trigger ``dag_id`` and wait until it ends; return ``(run_id, state)``."""
        run_id = self.api.trigger(dag_id, conf or {})
        return run_id, self.final_state(dag_id, run_id, timeout)

    def final_state(self, dag_id: str, run_id: str, timeout: float = 900.0, grace: float = FAILED_GRACE_S) -> str:
        """The run's final state by the REST client's rule (``failed`` once it stayed failed ``grace`` seconds:
        :meth:`~airflow_region_failover.plugins.rest.AirflowRestClient.final_state`), and more: a failed run whose
        decision log still has an open decision is not final, the decision's clear is still to come."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.api.final_state(dag_id, run_id, timeout=max(1.0, deadline - time.monotonic()), grace=grace)
            if state == "success" or time.monotonic() > deadline or not self._restart_due(dag_id, run_id):
                return state

    def _restart_due(self, dag_id: str, run_id: str) -> bool:
        """Whether the run has a decision not applied yet (``False`` for a stack without decision logs)."""
        return self.logs is not None and self.logs.read(dag_id, run_id).open_decision is not None

    def tries(self, dag_id: str, run_id: str) -> dict[str, int]:
        """``task_id -> try_number`` of every task instance of the run."""
        return {ti["task_id"]: int(ti["try_number"]) for ti in self.api.task_instances(dag_id, run_id)}

    def states(self, dag_id: str, run_id: str) -> dict[str, str]:
        """``task_id -> state``."""
        return {ti["task_id"]: str(ti["state"]) for ti in self.api.task_instances(dag_id, run_id)}

    def explain(self, dag_id: str, run_id: str) -> str:
        """Everything a failed assertion needs, in full: states, tries and the decision log of the run."""
        import json

        tis = {ti["task_id"]: (ti["state"], ti["try_number"]) for ti in self.api.task_instances(dag_id, run_id)}
        doc = self.history(dag_id, run_id)
        text = f"{dag_id}/{run_id}\ntasks: {tis}\ndecisions: {json.dumps(doc.get('decisions'), indent=1)}" \
               f"\nevents: {json.dumps(doc.get('events'))}\ncleared: {doc.get('cleared_tries')}" \
               f"{self.failover_log(run_id)}"
        print(text)  # shown in full under "Captured stdout" even where pytest shortens the assertion message
        return text

    def failover_log(self, run_id: str, last: int = 40) -> str:
        """The last ``last`` lines the stack's components logged about the run's failover (the watchers' view of
        it: what they found, recorded, applied or could not), one section per log file."""
        home = getattr(self.stack, "home", None)
        sections = []
        for path in sorted(Path(home).glob("*.log")) if home is not None else ():
            with path.open(errors="replace") as lines:
                found = [line.rstrip()[:400] for line in lines if "region failover" in line and run_id in line]
            if found:
                sections.append(f"\n{path.name}:\n" + "\n".join(found[-last:]))
        return "".join(sections)

    def history(self, dag_id: str, run_id: str) -> dict[str, Any]:
        """The run's decision log (its JSON form)."""
        return dict(self.logs.read(dag_id, run_id).to_json())

    def wait_until(self, predicate: Any, timeout: float = 120.0, what: str = "condition") -> None:
        """Poll ``predicate()`` until true."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not reached after {timeout:.0f} s")
            time.sleep(0.3)


