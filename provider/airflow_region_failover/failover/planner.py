"""*Which subtasks restart?* — the failover strategies ``region`` and ``full``.

``region`` (Flink's ``RestartPipelinedRegionFailoverStrategy``): a breadth-first walk over regions, starting at
the failed subtask's region. For every region taken:

1. **upstream** — each BLOCKING partition it consumes that is not available (the checker says so, or the failure
   named it as its cause) pulls in the region producing it;
2. **downstream** — every region consuming a partition it produces is pulled in, whatever its state, because a
   re-produced result may differ;
3. both rules apply to every region pulled in, transitively.

Each partition group is visited once per direction (Flink's visited ConsumedPartitionGroups /
ConsumerRegionGroups), and a partition whose producer already restarts is not checked, so a dense exchange costs
O(S + T), not O(S x T). ``full`` restarts every region; regions the ``region`` rules would not restart are
labelled ``full``. Availability named by one failure does not persist: it is an argument of one call.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from airflow_region_failover.failover.availability import AvailabilityChecker
from airflow_region_failover.failover.options import FailoverStrategy
from airflow_region_failover.failover.restart_plan import Reason, RegionRestart, RestartPlan
from airflow_region_failover.failover.topology import FailoverTopology
from airflow_region_failover.graph.ids import PartitionId, SubtaskId


def plan_restart(
    topology: FailoverTopology,
    failed: SubtaskId,
    checker: AvailabilityChecker,
    strategy: FailoverStrategy | str = FailoverStrategy.REGION,
    unavailable: Iterable[PartitionId] = (),
) -> RestartPlan:
    """The restart plan for the failure of ``failed`` (see the module docstring for the rules)."""
    chosen = FailoverStrategy.parse(strategy)
    walk = _RegionWalk(topology, checker, frozenset(unavailable))
    walk.run(topology.regions.region_of(failed).index, f"{failed} failed")
    if chosen is FailoverStrategy.FULL:
        walk.add_all_remaining()
    restarts = tuple(
        RegionRestart(topology.regions.regions[i], reason, cause) for i, (reason, cause) in sorted(walk.pulled.items())
    )
    return RestartPlan(failed, chosen, restarts)


@dataclass
class _RegionWalk:
    """The breadth-first walk of the ``region`` strategy (mutable scratch state of one planning call)."""

    topology: FailoverTopology
    checker: AvailabilityChecker
    named_unavailable: frozenset[PartitionId]
    pulled: dict[int, tuple[Reason, str]] = field(default_factory=dict)
    _queue: deque[int] = field(default_factory=deque)
    _seen_consumed: set[int] = field(default_factory=set)
    _seen_produced: set[int] = field(default_factory=set)

    def run(self, start: int, cause: str) -> None:
        self._pull(start, Reason.FAILED, cause)
        while self._queue:
            region = self._queue.popleft()
            self._upstream(region)
            self._downstream(region)

    def add_all_remaining(self) -> None:
        for region in self.topology.regions.regions:
            if region.index not in self.pulled:
                self.pulled[region.index] = (Reason.FULL, "failover strategy 'full' restarts every region")

    def _pull(self, region: int, reason: Reason, cause: str) -> None:
        if region not in self.pulled:
            self.pulled[region] = (reason, cause)
            self._queue.append(region)

    def _upstream(self, region: int) -> None:
        """Rule 1: unavailable BLOCKING inputs pull in their producers' regions."""
        region_index = self.topology.regions.region_index
        for k in self.topology.consumes[region]:
            if k in self._seen_consumed:
                continue
            self._seen_consumed.add(k)
            group = self.topology.groups[k]
            for number, index in zip(group.producers, group.group.producers, strict=True):
                producer = region_index[number]
                if producer in self.pulled:
                    continue
                partition = PartitionId(group.group.edge.result, index)
                if partition in self.named_unavailable or not self.checker.is_available(partition):
                    self._pull(
                        producer, Reason.PRODUCER_UNAVAILABLE, f"{partition} is unavailable and r{region} needs it"
                    )

    def _downstream(self, region: int) -> None:
        """Downstream (rule 2 above): every consumer region of a partition this region produces restarts."""
        region_index = self.topology.regions.region_index
        for k in self.topology.produces[region]:
            if k in self._seen_produced:
                continue
            self._seen_produced.add(k)
            group = self.topology.groups[k]
            cause = f"reads {group.group.edge.result} from r{region}, which restarts"
            for number in group.consumers:
                self._pull(region_index[number], Reason.CONSUMER, cause)
