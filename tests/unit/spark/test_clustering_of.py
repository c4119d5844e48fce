"""Which results are clustered and which columns they keep: the cluster_by and columns of a result's consumer edges
(pure: no Spark session)."""

from __future__ import annotations

from airflow_region_failover.graph.builder import JobGraphBuilder
from airflow_region_failover.spark.exchange import clustering_of, cut_of, kept_columns
from airflow_region_failover.store.dataplane.clustered import Clustering


def test_the_graph_names_the_clustering_of_a_result() -> None:
    #   p =BLOCKING "events" cluster_by [customer]=> c
    graph = (JobGraphBuilder().step("p").step("c")
             .edge("p", "c", exchange="BLOCKING", result="events", cluster_by=["customer"]).build())
    assert clustering_of(graph, "events") == Clustering(("customer",), where="step 'p', edge p -> c")
    assert clustering_of(graph, "p") is None  # a sink result
    assert cut_of(graph, "events") is None  # clustered, not keyed


def test_an_edge_without_cluster_by_inherits_it_from_its_sibling() -> None:
    #   p =BLOCKING "events"=> c
    #     =BLOCKING "events" cluster_by [day]=> d
    graph = (JobGraphBuilder().step("p").step("c").step("d")
             .edge("p", "c", exchange="BLOCKING", result="events")
             .edge("p", "d", exchange="BLOCKING", result="events", cluster_by=["day"]).build())
    clustering = clustering_of(graph, "events")
    assert clustering is not None and clustering.cluster_by == ("day",) and "edge p -> d" in clustering.where


def test_the_graph_names_the_columns_a_result_keeps_and_a_sibling_inherits_them() -> None:
    #   p =BLOCKING "events"=> c
    #     =BLOCKING "events" columns [day, amount]=> d
    graph = (JobGraphBuilder().step("p").step("c").step("d")
             .edge("p", "c", exchange="BLOCKING", result="events")
             .edge("p", "d", exchange="BLOCKING", result="events", columns=["day", "amount"]).build())
    assert kept_columns(graph, "events") == ("day", "amount")
    assert kept_columns(graph, "p") == ()  # a sink result keeps everything
