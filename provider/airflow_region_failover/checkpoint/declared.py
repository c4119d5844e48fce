"""Which chain subtasks are checkpointed, and how: the declarations of a chain's members taken together.

Rules (checked when the DAG file renders, each a :class:`~.exceptions.GraphError` naming the step and the fix):

* a chain is *checkpointed* when one of its members declares ``checkpoint=`` (an unchained step is a chain of
  one). Its epochs cut the chain head's *sliced input* — the only input, or the one ``sliced_input`` names (by
  producer step or result name); the head's other inputs are handed over whole at every epoch. The sliced input
  must be BLOCKING (its committed objects are what the epochs cut), and keyed (``partition_by``) for the
  ``key-groups`` cut;
* every member runs once per epoch, as a checkpoint barrier passes through every operator: a member that declares
  ``checkpoint=`` gets its state and returns ``(output, new_state)``; one that does not must be per-row
  (its output over the whole input is the union of its outputs per slice). Members declaring ``checkpoint=``
  agree on ``epochs`` (and ``max_epochs``), ``cut``, ``sliced_input`` and ``enabled``: one plan for the chain
  (``epochs="AUTO"``: the chain runs the epochs its run's plan fixed, :meth:`ChainCheckpoint.with_epochs`);
* the tail's results are committed from the epochs' objects as they come, so none may be ``cluster_by`` (a sorted
  result needs the whole partition at once); a script step cannot be checkpointed (it runs in its own Spark
  application).
* a stateful member's state rows carry key groups: those of the sliced input's ``partition_by`` (with its
  ``max_parallelism``) when every partition_by column is a state key column — then the state can be rescaled by
  key-group range — else of the state key over the default number of key groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_region_failover.exceptions import GraphError
from airflow_region_failover.failover.checkpointing import Checkpoint, EpochCut
from airflow_region_failover.graph.ids import SubtaskId
from airflow_region_failover.graph.keygroups import DEFAULT_MAX_PARALLELISM
from airflow_region_failover.graph.model import Edge, Exchange, JobGraph
from airflow_region_failover.graph.subtasks import read_key_groups
from airflow_region_failover.job import StepImpl


@dataclass(frozen=True)
class ChainCheckpoint:
    """A checkpointed chain (module rules): its plan's ``declaration`` (the first declaring member's), the
    ``sliced`` input edge of its head, and every stateful member's declaration, in chain order."""

    declaration: Checkpoint
    sliced: Edge
    stateful: Mapping[str, Checkpoint]

    @property
    def auto(self) -> bool:
        """Whether the chain's epochs are chosen per run (``Checkpoint(epochs="AUTO")``)."""
        return self.declaration.auto

    def with_epochs(self, epochs: int) -> ChainCheckpoint:
        """This chain running ``epochs`` epochs: every declaration as its run's plan fixed it."""
        return ChainCheckpoint(self.declaration.with_epochs(epochs), self.sliced,
                               {step: c.with_epochs(epochs) for step, c in self.stateful.items()})

    def key_columns(self, step: str) -> tuple[str, ...]:
        """The columns whose hash gives ``step``'s state rows their key groups (module rule)."""
        keyed = self.sliced.partition_by
        declared = self.stateful[step].state_key
        return keyed if keyed and set(keyed) <= set(declared) else declared

    def max_parallelism(self, step: str) -> int:
        """The number of key groups of ``step``'s state rows."""
        keyed = self.sliced.partition_by
        if keyed and set(keyed) <= set(self.stateful[step].state_key):
            return self.sliced.max_parallelism
        return DEFAULT_MAX_PARALLELISM

    def key_groups(self, graph: JobGraph, step: str, index: int) -> range:
        """The key groups subtask ``index``'s state of ``step`` holds: its range of the keyed sliced input, or all."""
        if self.key_columns(step) == self.sliced.partition_by:
            groups = read_key_groups(graph, self.sliced, index)
            if groups is not None:
                return groups
        return range(0, self.max_parallelism(step))

    def rescalable(self, step: str) -> bool:
        """Whether ``step``'s state may start another parallelism's subtasks (keyed by the sliced input)."""
        return self.key_columns(step) == self.sliced.partition_by

    def declarations(self) -> dict[str, object]:
        """The stateful members' declarations as JSON (part of the epoch plan's fingerprint)."""
        return {step: c.to_dict() for step, c in self.stateful.items()}


def chain_checkpoint(graph: JobGraph, members: Sequence[str], impls: Mapping[str, StepImpl]) -> ChainCheckpoint | None:
    """The checkpointing of the chain of steps ``members`` (head first), or ``None`` when no member declares it;
    :class:`GraphError` naming the step when the declarations cannot work (module rules)."""
    stateful = {step: impls[step].checkpoint for step in members if impls[step].checkpoint is not None}
    if not stateful:
        return None
    declared: dict[str, Checkpoint] = {step: c for step, c in stateful.items() if c is not None}
    first_step, first = next(iter(declared.items()))
    plan = (first.epochs, first.max_epochs, first.cut, first.sliced_input, first.enabled)
    for step, decl in declared.items():
        decl.check(step)
        if impls[step].script is not None:
            raise GraphError(f"step {step!r}: a script step cannot be checkpointed (it runs in its own Spark "
                             "application); use a step function fn(spark, inputs, state, context)")
        if (decl.epochs, decl.max_epochs, decl.cut, decl.sliced_input, decl.enabled) != plan:
            raise GraphError(f"step {step!r} is chained with {first_step!r} but declares another epoch plan; give "
                             "the chained steps equal epochs, max_epochs, cut, sliced_input and enabled")
    sliced = _sliced_edge(graph, members[0], first_step, first)
    _check_outputs(graph, members[-1], first_step)
    return ChainCheckpoint(first, sliced, declared)


def _sliced_edge(graph: JobGraph, head: str, step: str, decl: Checkpoint) -> Edge:
    where = f"step {step!r}: Checkpoint"
    inputs = graph.inputs(head)
    if decl.sliced_input is not None:
        chosen = [e for e in inputs if decl.sliced_input in (e.source, e.result)]
        if not chosen:
            names = ", ".join(sorted({e.source for e in inputs})) or "none"
            raise GraphError(f"{where}(sliced_input={decl.sliced_input!r}) names no input of {head!r} "
                             f"(inputs: {names}); name one of them")
    elif len(inputs) != 1:
        raise GraphError(f"{where}: {head!r} reads {len(inputs)} inputs; say which one the epochs cut with "
                         "sliced_input=<producer step>" if inputs else
                         f"{where}: {head!r} reads no input, so there is nothing to cut into epochs; add a "
                         "BLOCKING input edge")
    else:
        chosen = list(inputs)
    edge = chosen[0]
    if edge.exchange is not Exchange.BLOCKING:
        raise GraphError(f"{where}: the sliced input {edge} is {edge.exchange.value}; make it BLOCKING (its "
                         "committed objects are cut into epochs)")
    if EpochCut(decl.cut) is EpochCut.KEY_GROUPS and not edge.keyed:
        raise GraphError(f"{where}(cut='key-groups') needs a keyed input, but {edge} has no partition_by; key it "
                         "or use cut='objects'")
    return edge


def _check_outputs(graph: JobGraph, tail: str, step: str) -> None:
    for result in graph.outputs(tail):
        if any(e.cluster_by for e in result.consumers):
            raise GraphError(f"step {step!r} is checkpointed, so result {result.id!r} of {tail!r} is committed from "
                             "its epochs' objects as they come and cannot be cluster_by; remove cluster_by")


def state_subtask(members: Sequence[SubtaskId]) -> SubtaskId:
    """The subtask whose id keys a chain subtask's checkpoints: its tail
    (:meth:`~.store.keys.RunKeys.checkpoints_prefix`)."""
    return members[-1]
