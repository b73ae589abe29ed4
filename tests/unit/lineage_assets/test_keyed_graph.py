"""Two deployments' lineage graphs compared by identity keys: the same graph under other namespaces is equal,
a missing edge or field is not, and foreign nodes and optional columns do not count."""

from __future__ import annotations

from infra.settings import StackSettings
from lineage_assets.checks.graph import DatasetNode, JobNode, LineageGraph
from lineage_assets.checks.keyed_graph import differences, keyed_graph
from lineage_assets.lineage.identity import Pipeline

EMBEDDED = Pipeline.from_settings(StackSettings())
COMPOSE = Pipeline.from_settings(
    StackSettings.from_env(
        {"LINEAGE_LAB_EXTERNAL_KAFKA": "kafka:9092", "LINEAGE_LAB_EXTERNAL_POSTGRES": "postgres:15432"}
    )
)


def graph_of(pipeline: Pipeline, with_optional: bool = False, drop_edge: bool = False) -> LineageGraph:
    """The pipeline's declared graph as Marquez would hold it, plus a foreign job reading Kafka orders."""
    graph = LineageGraph()
    for ds in pipeline.datasets.values():
        columns = [c for c in ds.columns if with_optional or not c.optional]
        node = DatasetNode((ds.namespace, ds.name), fields={c.name: c.type for c in columns})
        graph.datasets[node.identity] = node
    for job in pipeline.jobs.values():
        node = JobNode((job.namespace, job.name), processing_type=job.processing_type)
        node.inputs = {(pipeline.datasets[k].namespace, pipeline.datasets[k].name) for k in job.inputs}
        node.outputs = {(pipeline.datasets[k].namespace, pipeline.datasets[k].name) for k in job.outputs}
        graph.jobs[node.identity] = node
    orders = pipeline.dataset("kafka_orders")
    iceberg = graph.datasets[(pipeline.dataset("iceberg_orders").namespace, pipeline.dataset("iceberg_orders").name)]
    iceberg.column_sources["item"] = {((orders.namespace, orders.name), "item")}
    if with_optional:  # once the source has the optional column, the table's own column is read from it
        iceberg.column_sources["currency"] = {((orders.namespace, orders.name), "currency")}
    graph.jobs[("another-team", "reader")] = JobNode(
        ("another-team", "reader"), inputs={(orders.namespace, orders.name)}
    )
    if drop_edge:
        first = next(j for j in graph.jobs.values() if j.inputs and j.identity[0] != "another-team")
        first.inputs = set()
    return graph


def test_the_same_graph_under_other_namespaces_is_equal():
    assert orders_namespaces_differ()
    assert differences(keyed_graph(EMBEDDED, graph_of(EMBEDDED)), keyed_graph(COMPOSE, graph_of(COMPOSE))) == []


def test_a_missing_input_edge_is_a_difference():
    found = differences(
        keyed_graph(EMBEDDED, graph_of(EMBEDDED)), keyed_graph(COMPOSE, graph_of(COMPOSE, drop_edge=True))
    )
    assert len(found) == 1 and found[0].startswith("jobs ")


def test_optional_columns_and_foreign_jobs_do_not_count():
    keyed = keyed_graph(EMBEDDED, graph_of(EMBEDDED, with_optional=True))
    assert differences(keyed, keyed_graph(COMPOSE, graph_of(COMPOSE))) == []
    assert "currency" not in keyed["datasets"]["kafka_orders"]
    assert keyed["columns"] == {"iceberg_orders.item": ["kafka_orders.item"]}
    assert all(not job.startswith("another-team") for job in keyed["jobs"])


def orders_namespaces_differ() -> bool:
    return EMBEDDED.dataset("kafka_orders").namespace != COMPOSE.dataset("kafka_orders").namespace
