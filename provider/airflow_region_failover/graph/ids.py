"""Identifiers of steps, results, subtasks and result partitions.

Rule: every id that reaches Airflow (task ids, TaskGroup ids) or S3 (key parts) is built from ids validated
here. Step ids are ASCII letters, digits, ``_`` and ``-`` (not starting with ``-``), at most 100 characters: they
are legal Airflow task ids, contain no ``.`` (Airflow's group separator) and no ``/`` or ``..`` (S3 key parts).
Result names may in addition contain ``->`` between id characters, so the default name ``"<from>-><to>"`` is
valid; :func:`key_part` maps them onto a plain S3-safe form. Ids beginning with ``_`` are reserved: the store
keeps its own entries beside a run's results under such names (``R/_holds/``, ``R/_run.json``), so a result named
``_holds`` would make every run count as held. A subtask is ``<step>#<i>``, a result partition ``<result>#<i>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from airflow_region_failover.graph.errors import GraphError

MAX_ID_LENGTH = 100
RESERVED_PREFIX = "_"
"""Ids beginning with it are the store's (module rule)."""
_STEP_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*\Z")
_RESULT_ID = re.compile(r"[A-Za-z0-9_](?:->(?=[A-Za-z0-9_])|[A-Za-z0-9_-])*\Z")


def check_step_id(step_id: object, *, what: str = "step id") -> str:
    """Return ``step_id`` if it is a valid step id, else raise :class:`GraphError` naming it and the fix."""
    if not isinstance(step_id, str) or not step_id:
        raise GraphError(f"{what} {step_id!r} must be a non-empty string")
    if len(step_id) > MAX_ID_LENGTH or not _STEP_ID.match(step_id):
        raise GraphError(
            f"{what} {step_id!r} is not usable as an Airflow task id / S3 key part: use at most "
            f"{MAX_ID_LENGTH} ASCII letters, digits, '_' or '-' (not starting with '-')"
        )
    return _unreserved(step_id, what)


def check_result_id(result_id: object) -> str:
    """Return ``result_id`` if it is a valid result name (step-id characters plus ``>``), else raise."""
    if not isinstance(result_id, str) or not result_id:
        raise GraphError(f"result name {result_id!r} must be a non-empty string")
    if len(result_id) > 2 * MAX_ID_LENGTH + 2 or not _RESULT_ID.match(result_id):
        raise GraphError(
            f"result name {result_id!r} is not usable as an S3 key part: use ASCII letters, digits, '_' or '-' "
            "(not starting with '-'), optionally joined by '->' as in 'clean->join'"
        )
    return _unreserved(result_id, "result name")


def _unreserved(name: str, what: str) -> str:
    if name.startswith(RESERVED_PREFIX):
        raise GraphError(f"{what} {name!r} is reserved: ids beginning with {RESERVED_PREFIX!r} name the result "
                         f"store's own entries (such as '_holds'); rename it, e.g. {name.lstrip('_') or 'x'!r}")
    return name


def key_part(result_id: str) -> str:
    """Map a validated result name onto an S3-safe key part: ``a->b`` becomes ``a.to.b`` (injective).

    ``>`` is the only character of a result name that S3 advises against; it only occurs in ``->`` and ``.``
    never occurs in a result name, so ``.to.`` is unambiguous and never forms ``..``.
    """
    check_result_id(result_id)
    return result_id.replace("->", ".to.")


def default_result_id(source: str, target: str) -> str:
    """The result name of an edge that names none: ``"<from>-><to>"``."""
    return f"{source}->{target}"


@dataclass(frozen=True, order=True)
class SubtaskId:
    """Subtask ``index`` of step ``step``; printed ``step#index``."""

    step: str
    index: int

    def __str__(self) -> str:
        return f"{self.step}#{self.index}"

    @classmethod
    def parse(cls, text: str) -> SubtaskId:
        """Parse ``step#index``; raise :class:`GraphError` naming the text otherwise."""
        step, index = _split(text, "subtask")
        return cls(step, index)


@dataclass(frozen=True, order=True)
class PartitionId:
    """Partition ``index`` of result ``result`` (produced by subtask ``index`` of its producer)."""

    result: str
    index: int

    def __str__(self) -> str:
        return f"{self.result}#{self.index}"

    @classmethod
    def parse(cls, text: str) -> PartitionId:
        """Parse ``result#index``; raise :class:`GraphError` naming the text otherwise."""
        result, index = _split(text, "partition")
        return cls(result, index)


def _split(text: str, what: str) -> tuple[str, int]:
    name, sep, index = text.rpartition("#")
    if not sep or not name or not index.isdigit() or not index.isascii():
        raise GraphError(f"{what} {text!r} must look like '<name>#<index>', e.g. 'clean#0'")
    return name, int(index)
