"""What a checkpointed step declares, and the checkpointing options — Flink's checkpoints for batch steps.

FLIP-1: "batch jobs do not perform any checkpoints and are hence completely restarted in case of a task
failure". A step declared with a :class:`Checkpoint` is not: it processes its BLOCKING input in ordered *epochs*
and carries keyed *state* from one epoch to the next, and after an epoch a checkpoint is committed, so a later try
of that subtask restores the latest complete checkpoint and redoes only the epochs after it. Flink's stream fault
tolerance is the model: "barriers cut the stream into epochs ... Upon a failure, Flink selects the latest completed
checkpoint *k* ... and gives each operator the state that was snapshotted as part of checkpoint *k*. The sources are
set to start reading the stream from position S_k." Here the input is bounded and already committed, so "position S_k"
is an epoch boundary of a deterministic cut (:class:`EpochCut`) of that input. The restart set does not change: what a
restarted checkpointed subtask redoes does.

Declaration rules (checked when the DAG file renders, one :class:`~.graph.errors.GraphError` naming the step):

* ``state_key``: the columns that identify a row of the state (unique per row; at least one; a column name or a
  list of them, refused at once otherwise); ``state_schema``: the state's columns as a Spark DDL string
  (``"user string, start long"``, its type names checked without Spark: :mod:`.schema_ddl`), which must contain
  the key columns — the first epoch gets an empty state of this schema;
* ``epochs`` (>= 1): how many epochs the input is cut into (fewer when it has fewer pieces), or ``"AUTO"``
  (:data:`AUTO_EPOCHS`): the provider picks each run's epochs from what earlier runs measured (Young/Daly,
  :mod:`~.planning.epochs`), fixed once per run in the run's plan, at most ``max_epochs`` (1 to 100000, default
  :data:`DEFAULT_MAX_EPOCHS`; only with ``"AUTO"``); any other string is refused at once; ``cut``:
  ``objects`` (the sliced input's objects — content-defined chunks of a clustered result too — in manifest
  order, grouped into epochs of about equal bytes) or ``key-groups`` (the subtask's key-group range of a keyed
  input, cut into contiguous sub-ranges); ``sliced_input``: which input is cut (required when the step reads
  several; the others are handed over whole at every epoch);
* ``enabled=False`` runs the same epochs without checkpoints (a failure restarts from the first epoch).

Options (job ``options``, Flink's keys where Flink has one; :class:`CheckpointConfig`, one typed field per key and
one declared default each):

==========================================  ==========  =====================================================
key                                         default     meaning
==========================================  ==========  =====================================================
``execution.checkpointing.interval``        ``0 ms``    least time between two checkpoints of a subtask; 0: at
                                                        every epoch boundary (the last one always checkpoints)
``state.checkpoints.num-retained``          ``1``       completed checkpoints kept per subtask (Flink 2's
                                                        ``execution.checkpointing.num-retained`` wins if both)
``state.backend.incremental``               ``true``    a checkpoint uploads only the state that changed (Flink
                                                        2's ``execution.checkpointing.incremental`` wins; Flink's
                                                        default is false)
``state.checkpoints.max-sorted-runs``       ``8``       ours: more state files than this -> merge the newest
``state.checkpoints.max-size-amplification`` ``200``     ours: deltas above this % of the base -> full compaction
``execution.state-recovery.path``           (none)      a run id of this DAG (or ``latest``) whose retained final
                                                        checkpoint is the initial state of this run's steps
==========================================  ==========  =====================================================

The two compaction keys mirror RocksDB's universal compaction (``level0_file_num_compaction_trigger``,
``max_size_amplification_percent``), as Flink's incremental checkpoints rely on RocksDB's compaction ("a background
task called compaction is constantly merging sstables").
Every bad value is one :class:`~.graph.errors.OptionError` naming the key, the value and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum

from airflow_region_failover.failover.schema_ddl import schema_columns
from airflow_region_failover.failover.values import fail, parse_duration_value, parse_int
from airflow_region_failover.graph.errors import GraphError

INTERVAL_KEY = "execution.checkpointing.interval"
NUM_RETAINED_KEY = "state.checkpoints.num-retained"
NUM_RETAINED_KEY_2 = "execution.checkpointing.num-retained"
INCREMENTAL_KEY = "state.backend.incremental"
INCREMENTAL_KEY_2 = "execution.checkpointing.incremental"
MAX_SORTED_RUNS_KEY = "state.checkpoints.max-sorted-runs"
MAX_SIZE_AMPLIFICATION_KEY = "state.checkpoints.max-size-amplification"
STATE_RECOVERY_KEY = "execution.state-recovery.path"
CHECKPOINT_KEYS: frozenset[str] = frozenset({
    INTERVAL_KEY, NUM_RETAINED_KEY, NUM_RETAINED_KEY_2, INCREMENTAL_KEY, INCREMENTAL_KEY_2, MAX_SORTED_RUNS_KEY,
    MAX_SIZE_AMPLIFICATION_KEY, STATE_RECOVERY_KEY})
"""Every checkpointing option key (known to :func:`~.options.parse_options`)."""
LATEST = "latest"
"""``execution.state-recovery.path: latest``: the newest other run of the DAG with a retained final checkpoint."""
_RUN_REF = re.compile(r"[^\s/\\]{1,250}\Z")
AUTO_EPOCHS = "AUTO"
"""``Checkpoint(epochs="AUTO")``: each run's epochs are chosen for it (module rule)."""
DEFAULT_MAX_EPOCHS = 1000
"""The most epochs ``"AUTO"`` chooses unless ``max_epochs`` says otherwise (each is a Spark job and a checkpoint)."""
MOST_EPOCHS = 100_000
"""The most epochs any declaration may ask for."""


class EpochCut(str, Enum):
    """How the sliced input is cut into epochs (module rule)."""

    OBJECTS = "objects"
    KEY_GROUPS = "key-groups"
    SUBTASKS = "subtasks"
    """The provider's own cut of a sliced chain (:mod:`~..graph.slicing`): epoch ``k`` is a virtual subtask; never
    declared."""


@dataclass(frozen=True)
class Checkpoint:
    """What a checkpointed step declares (module rule), e.g.::

        job.step("sessions", sessionize, checkpoint=Checkpoint(
            state_key=["user"], state_schema="user string, start long, last long, clicks long", epochs=20))
    """

    state_key: tuple[str, ...]
    state_schema: str
    epochs: int | str = 10
    cut: EpochCut | str = EpochCut.OBJECTS
    sliced_input: str | None = None
    enabled: bool = True
    max_epochs: int = DEFAULT_MAX_EPOCHS

    def __post_init__(self) -> None:
        if isinstance(self.state_key, str):
            object.__setattr__(self, "state_key", (self.state_key,))
        if not isinstance(self.state_key, (list, tuple)):
            raise GraphError(f"Checkpoint(state_key={self.state_key!r}) must be a column name or a list of column "
                             "names, e.g. state_key=['user']")
        object.__setattr__(self, "state_key", tuple(self.state_key))
        try:
            object.__setattr__(self, "cut", EpochCut(self.cut))
        except ValueError:
            raise GraphError(f"Checkpoint(cut={self.cut!r}) is unknown; use 'objects' or 'key-groups'") from None
        if self.cut is EpochCut.SUBTASKS:
            raise GraphError("Checkpoint(cut='subtasks') is the provider's own cut of a rescalable step (it chooses "
                             "those epochs per run); declare cut='objects' or cut='key-groups'")
        if isinstance(self.epochs, str) and self.epochs != AUTO_EPOCHS:
            raise GraphError(f"Checkpoint(epochs={self.epochs!r}) is unknown; use a whole number of epochs (e.g. "
                             f"epochs=10) or epochs={AUTO_EPOCHS!r} to let the provider choose them per run")

    @property
    def auto(self) -> bool:
        """Whether each run's epochs are chosen for it (``epochs="AUTO"``)."""
        return self.epochs == AUTO_EPOCHS

    @property
    def count(self) -> int:
        """The number of epochs to cut; :class:`GraphError` for ``"AUTO"`` not yet fixed by its run's plan."""
        if isinstance(self.epochs, str):
            raise GraphError(f"Checkpoint(epochs={self.epochs!r}) has no number until its run's plan fixes one "
                             "(with_epochs)")
        return self.epochs

    def with_epochs(self, epochs: int) -> Checkpoint:
        """This declaration running ``epochs`` epochs (an ``"AUTO"`` one, as its run's plan fixed them)."""
        return replace(self, epochs=epochs)

    def check(self, step_id: str) -> None:
        """:class:`GraphError` naming ``step_id`` and the fix for a declaration that cannot work (module rule)."""
        where = f"step {step_id!r}: Checkpoint"
        if not self.state_key or not all(isinstance(c, str) and c for c in self.state_key):
            raise GraphError(f"{where}(state_key={list(self.state_key)!r}) needs one or more column names")
        columns = schema_columns(self.state_schema, where)
        missing = [c for c in self.state_key if c not in columns]
        if missing:
            raise GraphError(f"{where}: state_key column {missing[0]!r} is not in state_schema "
                             f"({', '.join(columns)}); add it to the schema")
        if not self.auto and not _whole(self.epochs):
            raise GraphError(f"{where}(epochs={self.epochs!r}) must be a whole number from 1 to {MOST_EPOCHS} or "
                             f"{AUTO_EPOCHS!r}")
        if not _whole(self.max_epochs):
            raise GraphError(f"{where}(max_epochs={self.max_epochs!r}) must be a whole number from 1 to "
                             f"{MOST_EPOCHS}")
        if self.max_epochs != DEFAULT_MAX_EPOCHS and not self.auto:
            raise GraphError(f"{where}(max_epochs={self.max_epochs}) bounds only epochs={AUTO_EPOCHS!r}; declare "
                             f"epochs={AUTO_EPOCHS!r} or drop max_epochs")
        if not isinstance(self.enabled, bool):
            raise GraphError(f"{where}(enabled={self.enabled!r}) must be True or False")

    def to_dict(self) -> dict[str, object]:
        """What identifies the declaration in a checkpoint's epoch plan (JSON)."""
        return {"state_key": list(self.state_key), "state_schema": self.state_schema, "epochs": self.epochs,
                "cut": EpochCut(self.cut).value, "sliced_input": self.sliced_input}


def _whole(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= MOST_EPOCHS


@dataclass(frozen=True)
class CheckpointConfig:
    """The checkpointing options of a job (module table), one typed field each."""

    interval_ms: int = 0
    num_retained: int = 1
    incremental: bool = True
    max_sorted_runs: int = 8
    max_size_amplification: int = 200
    state_recovery: str | None = None

    def to_options(self) -> dict[str, str]:
        """Every key explicit (the recovery path only when set); :func:`parse_checkpointing` reads them back."""
        options = {INTERVAL_KEY: f"{self.interval_ms} ms", NUM_RETAINED_KEY: str(self.num_retained),
                   INCREMENTAL_KEY: str(self.incremental).lower(), MAX_SORTED_RUNS_KEY: str(self.max_sorted_runs),
                   MAX_SIZE_AMPLIFICATION_KEY: str(self.max_size_amplification)}
        if self.state_recovery is not None:
            options[STATE_RECOVERY_KEY] = self.state_recovery
        return options


def parse_checkpointing(options: Mapping[str, object]) -> CheckpointConfig:
    """The :class:`CheckpointConfig` of ``options`` (other keys are ignored here); :class:`OptionError` naming the
    first bad key."""
    config = CheckpointConfig()
    interval = parse_duration_value(options.get(INTERVAL_KEY, config.interval_ms), INTERVAL_KEY)
    retained_key = NUM_RETAINED_KEY_2 if NUM_RETAINED_KEY_2 in options else NUM_RETAINED_KEY
    retained = parse_int(options.get(retained_key, config.num_retained), retained_key)
    if retained < 1:
        fail(retained_key, options[retained_key], "a whole number >= 1 (completed checkpoints to keep)")
    incremental_key = INCREMENTAL_KEY_2 if INCREMENTAL_KEY_2 in options else INCREMENTAL_KEY
    runs = parse_int(options.get(MAX_SORTED_RUNS_KEY, config.max_sorted_runs), MAX_SORTED_RUNS_KEY)
    if runs < 2:
        fail(MAX_SORTED_RUNS_KEY, options[MAX_SORTED_RUNS_KEY], "a whole number >= 2 (state files per checkpoint)")
    amplification = parse_int(options.get(MAX_SIZE_AMPLIFICATION_KEY, config.max_size_amplification),
                              MAX_SIZE_AMPLIFICATION_KEY)
    if amplification < 1:
        fail(MAX_SIZE_AMPLIFICATION_KEY, options[MAX_SIZE_AMPLIFICATION_KEY], "a whole percentage >= 1, e.g. 200")
    return CheckpointConfig(interval, retained, parse_bool(options.get(incremental_key, True), incremental_key),
                            runs, amplification, parse_recovery(options.get(STATE_RECOVERY_KEY)))


def parse_bool(value: object, key: str) -> bool:
    """``true``/``false`` (any case) or a ``bool``."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else None
    if text in ("true", "false"):
        return text == "true"
    return fail(key, value, "true or false")


def parse_recovery(value: object) -> str | None:
    """A run id of the same DAG, ``latest``, or nothing (``None``/empty)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _RUN_REF.match(value.strip()):
        return fail(STATE_RECOVERY_KEY, value, f"a run id of this DAG or {LATEST!r}")
    return value.strip()
