"""``region-failover plan``'s reuse hints (:mod:`airflow_region_failover.failover.reuse_hint`)."""

from __future__ import annotations

from airflow_region_failover import JobGraphBuilder, PartitionId, SubtaskId
from airflow_region_failover.failover.availability import KnownAvailability
from airflow_region_failover.failover.planner import plan_restart
from airflow_region_failover.failover.reuse_hint import CHECKED, DETERMINISTIC, PIPELINED, reuse_hints
from airflow_region_failover.failover.topology import FailoverTopology


def test_hints_follow_the_run_time_rule() -> None:
    """d#0 fails and a's partition ra2 is lost, so a reruns and its consumer regions follow::

        a (det.) ==> c#0 -P-> e#0        ==> BLOCKING keyed, -P-> PIPELINED
        b        ==> c#1 -P-> e#1        c reads a and b; d reads a (result ra2)
        a        ==> d#0

    {c#i, e#i} exchange PIPELINED data, so the hint says they rerun; a full plan has no hints. Without PIPELINED
    exchanges a consumer of a deterministic producer "may be kept", of another one "only if byte-identical".
    """
    graph = (JobGraphBuilder().step("a", deterministic=True).step("b").step("c", parallelism=2)
             .step("d").step("e", parallelism=2)
             .edge("a", "c", exchange="BLOCKING", result="ra", partition_by=["k"])
             .edge("a", "d", exchange="BLOCKING", result="ra2")
             .edge("b", "c", exchange="BLOCKING", partition_by=["k"])
             .edge("c", "e", exchange="PIPELINED", distribution="POINTWISE").build())
    topology = FailoverTopology.build(graph)
    lost_a = plan_restart(topology, SubtaskId("d", 0), KnownAvailability.except_([PartitionId("ra2", 0)]),
                          "region")
    hints = reuse_hints(graph, lost_a)
    assert hints["c#0"] == hints["c#1"] == PIPELINED, hints
    everything = KnownAvailability.except_([])
    assert reuse_hints(graph, plan_restart(topology, SubtaskId("d", 0), everything, "full")) == {}
    only_blocking = (JobGraphBuilder().step("a", deterministic=True).step("b").step("c").step("d")
                     .edge("a", "c", exchange="BLOCKING").edge("b", "d", exchange="BLOCKING").build())
    top = FailoverTopology.build(only_blocking)
    for failed, expected in (("a", {"c#0": DETERMINISTIC}), ("b", {"d#0": CHECKED})):
        assert reuse_hints(only_blocking, plan_restart(top, SubtaskId(failed, 0), everything, "region")) == expected
