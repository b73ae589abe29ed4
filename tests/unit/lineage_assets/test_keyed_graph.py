"""Two deployments' lineage graphs compared by identity keys: the same graph under other namespaces is equal,
a missing edge or field is not, and foreign nodes and optional columns do not count.

Both graphs are rebuilt from the hand-written events of the reference flow
(tests/unit/lineage_assets/checks/reference_lineage.py); the Compose deployment's are the same events with its
broker and database addresses written in, and a foreign job is added to one side only."""

from __future__ import annotations

import json

from infra.settings import StackSettings
from lineage_assets.checks.graph import LineageGraph
from lineage_assets.checks.keyed_graph import differences, keyed_graph
from lineage_assets.lineage.identity import Pipeline
from tests.unit.lineage_assets.checks.reference_lineage import whole_pipeline_events

EMBEDDED = Pipeline.from_settings(StackSettings())
COMPOSE = Pipeline.from_settings(
    StackSettings.from_env(
        {"LINEAGE_LAB_EXTERNAL_KAFKA": "kafka:9092", "LINEAGE_LAB_EXTERNAL_POSTGRES": "postgres:15432"}
    )
)
#: the embedded stack's addresses in the reference events, and the Compose deployment's
IN_COMPOSE = {"kafka://127.0.0.1:9092": "kafka://kafka:9092", "postgres://127.0.0.1:15432": "postgres://postgres:15432"}

FOREIGN_READER = {
    "eventType": "RUNNING",
    "eventTime": "2025-05-01T00:30:00.000Z",
    "run": {"runId": "0195c1c0-0000-7000-8000-00000000f00d"},
    "job": {"namespace": "another-team", "name": "reader"},
    "inputs": [{"namespace": "kafka://kafka:9092", "name": "orders"}],
    "outputs": [{"namespace": "s3://another-bucket", "name": "orders-copy"}],
}


def compose_events(currency: bool = True) -> list[dict]:
    text = json.dumps(whole_pipeline_events(currency=currency))
    for embedded, compose in IN_COMPOSE.items():
        text = text.replace(embedded, compose)
    return json.loads(text)


def embedded_graph(currency: bool = True) -> LineageGraph:
    return LineageGraph.from_events(whole_pipeline_events(currency=currency))


def test_the_deployments_name_kafka_orders_differently():
    assert EMBEDDED.dataset("kafka_orders").namespace == "kafka://127.0.0.1:9092"
    assert COMPOSE.dataset("kafka_orders").namespace == "kafka://kafka:9092"


def test_the_same_graph_under_other_namespaces_is_equal():
    compose = LineageGraph.from_events([*compose_events(), FOREIGN_READER])
    assert differences(keyed_graph(EMBEDDED, embedded_graph()), keyed_graph(COMPOSE, compose)) == []


def test_a_missing_input_edge_is_a_difference():
    events = compose_events()
    stats = next(e for e in events if e["job"]["name"] == "supplier-stats")
    stats["inputs"] = []
    found = differences(keyed_graph(EMBEDDED, embedded_graph()), keyed_graph(COMPOSE, LineageGraph.from_events(events)))
    assert found == [
        "jobs supplier-stats: {'inputs': ['kafka_orders'], 'outputs': ['dlq_supplier_stats', 'kafka_supplier_stats'], "
        "'processing_type': 'STREAMING', 'parent': None} != {'inputs': [], 'outputs': ['dlq_supplier_stats', "
        "'kafka_supplier_stats'], 'processing_type': 'STREAMING', 'parent': None}"
    ]


def test_a_missing_field_is_a_difference():
    events = compose_events()
    stats = next(e for e in events if e["job"]["name"] == "supplier-stats")
    fields = stats["outputs"][0]["facets"]["schema"]["fields"]
    fields[:] = [f for f in fields if f["name"] != "count"]
    found = differences(keyed_graph(EMBEDDED, embedded_graph()), keyed_graph(COMPOSE, LineageGraph.from_events(events)))
    assert len(found) == 1 and found[0].startswith("datasets kafka_supplier_stats: "), found
    assert "'count': 'long'" in found[0].split(" != ")[0] and "'count'" not in found[0].split(" != ")[1]


def test_optional_columns_and_foreign_jobs_do_not_count():
    keyed = keyed_graph(EMBEDDED, embedded_graph(currency=True))
    compose = LineageGraph.from_events([*compose_events(currency=False), FOREIGN_READER])
    assert differences(keyed, keyed_graph(COMPOSE, compose)) == []
    assert keyed["datasets"]["kafka_orders"] == {
        "bid_time": "timestamp-millis",
        "item": "string",
        "order_id": "string",
        "price": "string",
        "supplier": "string",
    }
    assert keyed["columns"]["kafka_supplier_stats.total_price"] == ["kafka_orders.price"]
    assert keyed["columns"]["iceberg_supplier_stats.bid_hour"] == ["iceberg_orders.bid_time"]
    assert not {"kafka_orders.currency", "archive_orders.currency", "iceberg_orders.currency"} & set(keyed["columns"])
    assert set(keyed_graph(COMPOSE, compose)["jobs"]) == {
        "orders-source",
        "orders-s3-sink",
        "supplier-stats",
        "iceberg-ingestion",
        "dagster",
        "dagster.supplier_stats",
    }
