"""Key layout: every S3 key the store uses, built only from validated ids, always under ``bucket/prefix``.

Layout (``R`` = ``<prefix>/v1/<dag>/<run>``, ``P`` = ``p<index:05d>``, ``A`` = ``a<attempt:06d>``)::

    R/_run.json                                   run record (first writer creates it)
    R/_holds/<name>.json                          hold: a pending restart may still read this run
    R/<result>/manifests/P/A.json                 commit record of one attempt (conditional create)
    R/<result>/retired/P/A.json                   retirement marker of one attempt (conditional create)
    R/<result>/data/P/A-<writer>/part-<k:05d>[-s<j:05d>]-t<try>.parquet   data objects of one writer of one
                                                  attempt (``-s<j>``: subpartition j of a keyed partition;
                                                  writers before manifest version 2)
    R/<result>/data/P/A-<writer>/uses-<h>.ref     the writer is about to list shared object ``h`` (empty)
    R/<result>/data/P/A-<writer>/alive            the writer's driver is still at work (renewed, empty)
    R/_checkpoints.v1/<step>/P/c<seq:06d>.json    a completed checkpoint of the chain subtask whose tail is
                                                  ``<step>#P`` (conditional create, written last)
    R/_checkpoints.v1/<step>/P/t<try:06d>.json    where try ``<try>`` of that subtask started: resumed or not, why
    R/_checkpoints.v1/<step>/P/n<seq:06d>.json    a note that checkpoint ``seq`` completed (kept when retention
                                                  drops the checkpoint: the failover view's history)

    <prefix>/cas/v1/<h[:2]>/<h>.parquet           a content-addressed data object (``h``: SHA-256 of its bytes,
                                                  64 lower-case hex digits), shared by every manifest listing it
    <prefix>/cas/v1/quarantine/<h>-<t>.parquet    an object found under ``h`` whose bytes are not ``h``'s, moved
                                                  aside at epoch second ``t`` (kept for inspection, swept after
                                                  the grace)
    <prefix>/cas/v1/quarantine/<h>.suspect        mark: the server could not serve the object under ``h`` (a GET
                                                  answered 5xx); its next put overwrites it (empty; swept after
                                                  the grace)

    <prefix>/failover/v1/runs/<dag>/<run>/log.json              the run's failover decision log
    <prefix>/failover/v1/runs/<dag>/<run>/plan.json             the run's exchange plan (conditional create)
    <prefix>/failover/v1/plans/<dag>/next.json                  the plan decided for the DAG's next run
    <prefix>/failover/v1/_pending/<dag>/<run>/<decision>         marker: that decision is not applied yet
    <prefix>/failover/v1/_probe/<random>                        the start-up probe of conditional writes (deleted)
    <prefix>/_region_failover_deployment.json                    marker: a deployment owns this prefix

    <prefix>/tables/<table>/                  published Delta tables at the default ``publish_root``: written by
                                              delta-rs (:mod:`airflow_region_failover.publication`), never by this
                                              package; no key here is built or checked by :class:`Layout`

Rules: ``dag`` and ``run`` are Airflow ids encoded injectively: ASCII letters, digits, ``_`` and ``-`` stay,
every other printable ASCII character becomes ``.xx`` (its hex code), so a part never holds ``/`` or ``..``
and is never a ``.``/``..`` segment; non-ASCII, control characters, empty ids and over-long ids are rejected.
``result`` goes through :func:`~airflow_region_failover.graph.ids.key_part`. Partition index >= 0,
attempt >= 1 and the writer token (hex) are checked; ``P`` has five digits, six from index 100000
(:data:`PARTITION_PART` matches both). The prefix is ``/``-separated segments of
``[A-Za-z0-9_.-]`` without ``.``/``..`` segments; the bucket follows S3's naming rules.
:meth:`Layout.check` is the last guard every key passes through. The shared area ``<prefix>/cas/v1/`` lies
outside ``<prefix>/v1/`` on purpose: a DAG id can be spelled like any folder inside ``v1/``, never like a sibling
of it; its keys are built only from a checked SHA-256 (:func:`check_sha256`). ``_checkpoints.v1`` holds a ``.``,
which a result's key part never does outside ``.to.``, so no result is ever named like it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_region_failover.exceptions import UnsafeKeyError
from airflow_region_failover.graph.errors import GraphError
from airflow_region_failover.graph.ids import PartitionId, key_part
from airflow_region_failover.store.key_checks import (
    cas_name,
    check_bucket,
    check_index,
    check_partition,
    check_prefix,
    check_sha256,
    check_writer,
    encode_airflow_id,
)

FORMAT_ROOT = "v1"
FAILOVER_ROOT = "failover/v1"
CAS_ROOT = "cas/v1"
CHECKPOINTS = "_checkpoints.v1"
DEPLOYMENT_MARKER = "_region_failover_deployment.json"
PARTITION_PART = r"p(?:\d{5}|[1-9]\d{5})"
"""Regex of the ``P`` key part: ``p{index:05d}`` for an index < 10**6 (five digits, six from 100000)."""
_SAFE_KEY = re.compile(r"[A-Za-z0-9_./-]+\Z")


@dataclass(frozen=True)
class AttemptId:
    """One producer attempt (its try number, from 1) of one partition in one DAG run: what a write is of."""

    dag_id: str
    run_id: str
    partition: PartitionId
    attempt: int

    def to_json(self) -> dict[str, Any]:
        """``{"dag_id", "run_id", "partition": "result#index", "attempt"}``."""
        return {"dag_id": self.dag_id, "run_id": self.run_id, "partition": str(self.partition),
                "attempt": self.attempt}

    @classmethod
    def from_json(cls, value: object) -> AttemptId:
        """Parse :meth:`to_json`'s form; :class:`GraphError` naming the value and what it must be."""
        v = value if isinstance(value, dict) and set(value) == {"dag_id", "run_id", "partition", "attempt"} else {}
        if not (isinstance(v.get("dag_id"), str) and isinstance(v.get("run_id"), str)
                and isinstance(v.get("partition"), str) and type(v.get("attempt")) is int and v["attempt"] >= 1):
            raise GraphError(f"attempt id {value!r} must be {{dag_id, run_id: str, partition: 'result#index', "
                             "attempt: int >= 1}")
        return cls(v["dag_id"], v["run_id"], PartitionId.parse(v["partition"]), v["attempt"])


@dataclass(frozen=True)
class RunKeys:
    """The keys of one DAG run (``dag_id``, ``run_id``) under ``root`` (= ``<prefix>/v1``)."""

    root: str
    dag_id: str
    run_id: str
    cas_root: str = ""

    @property
    def run_prefix(self) -> str:
        """``R/``: every key of this run starts with it."""
        dag = encode_airflow_id(self.dag_id, what="dag id")
        run = encode_airflow_id(self.run_id, what="run id")
        return _join(self.root, dag, run) + "/"

    def object_key(self, relative: str, shared: bool = False) -> str:
        """The full key of a manifest's object: ``relative`` to the run prefix, or (``shared``) to the shared area
        ``<prefix>/cas/v1/`` (then it must be :func:`cas_name` of some hash)."""
        if not shared:
            return self.run_prefix + relative
        if not self.cas_root or not re.fullmatch(r"[0-9a-f]{2}/[0-9a-f]{64}\.parquet", relative) or \
                relative[:2] != relative[3:5]:
            raise UnsafeKeyError(f"shared object {relative!r} is not <h[:2]>/<h>.parquet under a shared area")
        return f"{self.cas_root}/{relative}"

    def run_record(self) -> str:
        """``R/_run.json``."""
        return self.run_prefix + "_run.json"

    def hold(self, name: str) -> str:
        """``R/_holds/<name>.json``; ``name`` is encoded like an Airflow id."""
        return self.run_prefix + f"_holds/{encode_airflow_id(name, what='hold name')}.json"

    def holds_prefix(self) -> str:
        """``R/_holds/``."""
        return self.run_prefix + "_holds/"

    def result_prefix(self, result: str) -> str:
        """``R/<result>/``."""
        try:
            return self.run_prefix + key_part(result) + "/"
        except GraphError as exc:
            raise UnsafeKeyError(str(exc)) from None

    def manifests_prefix(self, result: str) -> str:
        """``R/<result>/manifests/``: one LIST here shows every commit of the result."""
        return self.result_prefix(result) + "manifests/"

    def retired_prefix(self, result: str) -> str:
        """``R/<result>/retired/``."""
        return self.result_prefix(result) + "retired/"

    def data_prefix(self, result: str) -> str:
        """``R/<result>/data/``: one LIST here shows every data object of the result with its size."""
        return self.result_prefix(result) + "data/"

    def manifest(self, partition: PartitionId, attempt: int) -> str:
        """``R/<result>/manifests/P/A.json``."""
        pa = _pa(partition, attempt)
        return self.manifests_prefix(partition.result) + pa + ".json"

    def retired(self, partition: PartitionId, attempt: int) -> str:
        """``R/<result>/retired/P/A.json``."""
        pa = _pa(partition, attempt)
        return self.retired_prefix(partition.result) + pa + ".json"

    def attempt_data(self, partition: PartitionId, attempt: int, writer: str) -> str:
        """``R/<result>/data/P/A-<writer>/``: the per-attempt, per-writer data prefix."""
        pa = _pa(partition, attempt)
        return self.data_prefix(partition.result) + pa + f"-{check_writer(writer)}/"

    def data_object(self, partition: PartitionId, attempt: int, writer: str, number: int, task_try: int = 0,
                    subpartition: int = -1) -> str:
        """``R/<result>/data/P/A-<writer>/part-<k:05d>[-s<j:05d>]-t<task_try>.parquet``.

        ``task_try`` (Spark's task attempt number) keeps a retried or speculative Spark task from overwriting
        the object of another try: only the objects the manifest names count. ``-s<j>``: the object holds
        subpartition ``j`` of a keyed partition.
        """
        check_index(number, what="object number")
        check_index(task_try, what="task try")
        sub = "" if subpartition < 0 else f"-s{check_index(subpartition, what='subpartition'):05d}"
        return self.attempt_data(partition, attempt, writer) + f"part-{number:05d}{sub}-t{task_try}.parquet"

    def heartbeat(self, partition: PartitionId, attempt: int, writer: str) -> str:
        """``R/<result>/data/P/A-<writer>/alive``: renewed while the writer's driver is at work, so the sweeper
        counts the writer as active however long its tasks are quiet (:mod:`.lifecycle`)."""
        return self.attempt_data(partition, attempt, writer) + "alive"

    def checkpoints_prefix(self, subtask: PartitionId) -> str:
        """``R/_checkpoints.v1/<step>/P/``: the checkpoints and try records of the chain subtask whose tail is
        ``subtask`` (a step id and index, given as a :class:`PartitionId` of its sink-like name)."""
        check_partition(subtask)
        return self.run_prefix + f"{CHECKPOINTS}/{key_part(subtask.result)}/p{subtask.index:05d}/"

    def checkpoint(self, subtask: PartitionId, seq: int) -> str:
        """``R/_checkpoints.v1/<step>/P/c<seq:06d>.json``: completed checkpoint ``seq`` (>= 1)."""
        return self.checkpoints_prefix(subtask) + f"c{check_index(seq, what='checkpoint', minimum=1):06d}.json"

    def checkpoint_note(self, subtask: PartitionId, seq: int) -> str:
        """``R/_checkpoints.v1/<step>/P/n<seq:06d>.json``: checkpoint ``seq`` completed (a note for the history)."""
        return self.checkpoints_prefix(subtask) + f"n{check_index(seq, what='checkpoint', minimum=1):06d}.json"

    def checkpoint_try(self, subtask: PartitionId, task_try: int) -> str:
        """``R/_checkpoints.v1/<step>/P/t<try:06d>.json``: where that try started."""
        return self.checkpoints_prefix(subtask) + f"t{check_index(task_try, what='task try', minimum=1):06d}.json"

    def announcement(self, partition: PartitionId, attempt: int, writer: str, digest: str) -> str:
        """``R/<result>/data/P/A-<writer>/uses-<h>.ref``: an empty marker — this writer is about to list the shared
        object ``h`` — that counts as a reference until the writer's prefix is swept (:mod:`.registry`)."""
        return self.attempt_data(partition, attempt, writer) + f"uses-{check_sha256(digest)}.ref"


def _pa(partition: PartitionId, attempt: int) -> str:
    check_partition(partition)
    check_index(attempt, what=f"attempt of {partition}", minimum=1)
    return f"p{partition.index:05d}/a{attempt:06d}"


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


@dataclass(frozen=True)
class Layout:
    """The configured ``bucket`` and ``prefix``; the only producer of keys, and their last guard."""

    bucket: str
    prefix: str = ""

    def __post_init__(self) -> None:
        check_bucket(self.bucket)
        object.__setattr__(self, "prefix", check_prefix(self.prefix))

    @property
    def root(self) -> str:
        """``<prefix>/v1``: the store's versioned root of results."""
        return _join(self.prefix, FORMAT_ROOT)

    @property
    def failover_root(self) -> str:
        """``<prefix>/failover/v1``: the decision logs (outside the results' tree, so gc never sweeps them)."""
        return _join(self.prefix, FAILOVER_ROOT)

    @property
    def cas_root(self) -> str:
        """``<prefix>/cas/v1``: the shared area of content-addressed data objects."""
        return _join(self.prefix, CAS_ROOT)

    def cas_object(self, digest: str) -> str:
        """``<prefix>/cas/v1/<h[:2]>/<h>.parquet``: the shared object whose bytes hash to ``digest``."""
        return f"{self.cas_root}/{cas_name(digest)}"

    @property
    def quarantine_root(self) -> str:
        """``<prefix>/cas/v1/quarantine``: shared objects found holding other bytes than their name."""
        return f"{self.cas_root}/quarantine"

    def quarantined(self, digest: str, moved_at: int) -> str:
        """``<prefix>/cas/v1/quarantine/<h>-<t>.parquet``: where a bad object under ``h`` is moved at ``t``."""
        return f"{self.quarantine_root}/{check_sha256(digest)}-{max(0, int(moved_at)):d}.parquet"

    def suspect(self, digest: str) -> str:
        """``<prefix>/cas/v1/quarantine/<h>.suspect``: the mark that the object under ``h`` could not be served."""
        return f"{self.quarantine_root}/{check_sha256(digest)}.suspect"

    def run_log(self, dag_id: str, run_id: str) -> str:
        """``<prefix>/failover/v1/runs/<dag>/<run>/log.json``: one run's decision log."""
        return f"{self.failover_root}/runs/{self._run_part(dag_id, run_id)}/log.json"

    def run_plan(self, dag_id: str, run_id: str) -> str:
        """``<prefix>/failover/v1/runs/<dag>/<run>/plan.json``: the exchange plan one run runs."""
        return f"{self.failover_root}/runs/{self._run_part(dag_id, run_id)}/plan.json"

    def failed_try(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """``<prefix>/failover/v1/runs/<dag>/<run>/tries/<task>/<try>.json``: what a failed try of a fused task
        measured before it failed."""
        check_index(try_number, what="try number", minimum=1)
        return f"{self.failed_tries(dag_id, run_id)}{encode_airflow_id(task_id, what='task id')}/{try_number}.json"

    def failed_tries(self, dag_id: str, run_id: str) -> str:
        """The prefix of every :meth:`failed_try` record of one run."""
        return f"{self.failover_root}/runs/{self._run_part(dag_id, run_id)}/tries/"

    def next_plan(self, dag_id: str) -> str:
        """``<prefix>/failover/v1/plans/<dag>/next.json``: the plan decided for the DAG's next run."""
        return f"{self.failover_root}/plans/{encode_airflow_id(dag_id, what='dag id')}/next.json"

    def pending_marker(self, dag_id: str, run_id: str, decision_id: int) -> str:
        """``<prefix>/failover/v1/_pending/<dag>/<run>/<decision>``: that decision of the run is not applied yet."""
        check_index(decision_id, what="decision id")
        return f"{self.pending_prefix()}{self._run_part(dag_id, run_id)}/{decision_id}"

    def pending_prefix(self) -> str:
        """Prefix of every pending marker."""
        return f"{self.failover_root}/_pending/"

    @staticmethod
    def _run_part(dag_id: str, run_id: str) -> str:
        return f"{encode_airflow_id(dag_id, what='dag id')}/{encode_airflow_id(run_id, what='run id')}"

    def probe_key(self, token: str) -> str:
        """``<prefix>/failover/v1/_probe/<token>``: a throw-away object of the start-up probe."""
        return f"{self.failover_root}/_probe/{check_writer(token)}"

    @property
    def deployment_marker(self) -> str:
        """``<prefix>/_region_failover_deployment.json``: a deployment owns this prefix (see :mod:`.deployment`)."""
        return _join(self.prefix, DEPLOYMENT_MARKER)

    def enclosing_markers(self) -> tuple[str, ...]:
        """The marker keys another deployment would have at each proper parent of the prefix, nearest first."""
        segments = self.prefix.split("/") if self.prefix else []
        return tuple(_join(*segments[:n], DEPLOYMENT_MARKER) for n in range(len(segments) - 1, -1, -1))

    def run(self, dag_id: str, run_id: str) -> RunKeys:
        """The keys of one DAG run (validates both ids)."""
        keys = RunKeys(self.root, dag_id, run_id, self.cas_root)
        keys.run_prefix  # noqa: B018 - validates eagerly
        return keys

    def dag_prefix(self, dag_id: str) -> str:
        """``<prefix>/v1/<dag>/``."""
        return _join(self.root, encode_airflow_id(dag_id, what="dag id")) + "/"

    def check(self, key: str) -> str:
        """Return ``key`` (or a ``/``-ended prefix) if it lies under one of the three roots (results, shared area,
        failover logs) and is plain, or is this deployment's marker; else raise.

        Plain: ASCII ``[A-Za-z0-9_./-]`` only, no empty (``//``), ``.`` or ``..`` segment.
        """
        if key == self.deployment_marker:
            return key
        segments = key.removesuffix("/").split("/")
        if (
            not key.startswith((self.root + "/", self.cas_root + "/", self.failover_root + "/"))
            or not _SAFE_KEY.match(key)
            or any(s in {"", ".", ".."} for s in segments)
        ):
            raise UnsafeKeyError(f"key {key!r} is outside s3://{self.bucket}/{self.root}/ (or {self.cas_root}/, "
                                 f"{self.failover_root}/) "
                                 "or not plain")
        return key
