"""Is a failure worth a restart? Flink's failure classification (``ThrowableClassifier``: a non-recoverable error
suppresses restarts), plus evidence only this provider has: what every try read and which code ran.

Rules, for one failure of a subtask (both answered ``not-recoverable``, which ends the run instead of a restart):

1. **Declared.** Its exception class, or one of its base classes (:func:`~.error_class.declared_match`), is one
   of the names declared non-recoverable — the job's ``restart-strategy.non-recoverable-errors``, or the step's
   ``non_recoverable_errors`` instead (a chain task: the names every member declares). Checked before the
   budget: such a failure is not counted. A failure that names an input it could not read never is (restarting
   its producer heals it, whatever its class: the provider's errors are ``ValueError`` s).
2. **Evidence.** An earlier failure of the same task instance in the same epoch (a person's clear starts a new
   one, so their clear always reruns it) has the same exception class, the same message signature, and the same
   :class:`~.error_class.TryInputs`: byte-identical inputs and the same code fingerprint. The step is then
   deterministic on these inputs by evidence: a restart would fail the same way. Checked after the budget (a spent
   budget still reads ``exhausted``). It is no evidence — restart as usual — when either try's inputs or code
   are unknown, when the failure names an input it could not read (its producer restarts), or when its class is
   one of the infrastructure's (:data:`NO_EVIDENCE_BASES` among its bases, or exactly one of
   :data:`NO_EVIDENCE_CLASSES`): a lost connection, a timeout, a lost executor fail the same way twice by chance.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from airflow_region_failover.failover.error_class import declared_match
from airflow_region_failover.failover.run_log import FailureRecord

RULE_DECLARED = "declared non-recoverable"
RULE_EVIDENCE = "same error on the same inputs and code"
NO_EVIDENCE_BASES = frozenset({"OSError", "TimeoutError", "MemoryError", "RegionFailoverError", "ClientError",
                               "BotoCoreError", "AirflowTaskTimeout", "AirflowTaskTerminated"})
"""A failure with one of these among its classes (simple names) is never evidence: the network, S3, the
provider's own store errors, the worker's memory, Airflow's timeouts."""
NO_EVIDENCE_CLASSES = frozenset({"SparkConnectException", "SparkConnectGrpcException", "UnknownException",
                                 "SparkException", "Py4JJavaError", "Py4JError", "Py4JNetworkError"})
"""A failure of exactly one of these classes is never evidence: the engine's generic wrappers, which carry lost
executors and lost connections (Spark Connect's specific errors derive from ``SparkConnectGrpcException`` and
stay evidence: ``AnalysisException``, ``PythonException``...)."""


class FailureKind(str, Enum):
    """What a failure is, for the failover loop."""

    RECOVERABLE = "recoverable"
    DECLARED = "declared"
    DETERMINISTIC = "deterministic"


@dataclass(frozen=True)
class Verdict:
    """A failure's classification: its ``kind``, the ``rule`` that decided it and why (``reason``); ``earlier``:
    the key of the failure that is the evidence (rule 2)."""

    kind: FailureKind
    rule: str = ""
    reason: str = ""
    earlier: str | None = None

    @property
    def not_recoverable(self) -> bool:
        """Whether the run ends instead of restarting."""
        return self.kind is not FailureKind.RECOVERABLE


RECOVERABLE = Verdict(FailureKind.RECOVERABLE)


def declared(failure: FailureRecord, names: Iterable[str], where: str) -> Verdict:
    """Rule 1 for ``failure``: ``names`` are the non-recoverable class names that apply, declared by ``where``."""
    if failure.error_class is None or failure.cause is not None:
        return RECOVERABLE
    match = declared_match(failure.error_class.names, names)
    if match is None:
        return RECOVERABLE
    return Verdict(FailureKind.DECLARED, RULE_DECLARED,
                   f"not recoverable: {failure.task_id} try {failure.try_number} failed with "
                   f"{failure.error_class.name}, which {where} declares non-recoverable ({match!r}); fix the cause, "
                   "then clear the task to run it again")


def evidence(failure: FailureRecord, earlier: Iterable[FailureRecord]) -> Verdict:
    """Rule 2 for ``failure`` against the ``earlier`` failures of its run's current epoch."""
    if not _is_evidence(failure):
        return RECOVERABLE
    assert failure.error_class is not None
    for before in earlier:
        if (before.task_id, before.map_index) != (failure.task_id, failure.map_index) \
                or before.try_number >= failure.try_number or not _is_evidence(before):
            continue
        assert before.error_class is not None
        if before.error_class.names[0] == failure.error_class.names[0] \
                and before.error_class.signature == failure.error_class.signature and before.inputs == failure.inputs:
            return Verdict(FailureKind.DETERMINISTIC, RULE_EVIDENCE,
                           f"not recoverable: {failure.task_id} failed the same way on try {before.try_number} and "
                           f"try {failure.try_number} ({failure.error_class.name}, message signature "
                           f"{failure.error_class.signature}) on byte-identical inputs with the same code — the "
                           "rule 'same error on the same inputs and code': a restart would fail again; fix the code "
                           "or the data, then clear the task to run it again", before.key)
    return RECOVERABLE


def _is_evidence(failure: FailureRecord) -> bool:
    """Whether ``failure`` can take part in rule 2 (module rule)."""
    if failure.error_class is None or failure.inputs is None or failure.cause is not None:
        return False
    simple = {n.rsplit(".", 1)[-1] for n in failure.error_class.names}
    return not (simple & NO_EVIDENCE_BASES) and failure.error_class.name not in NO_EVIDENCE_CLASSES
