"""iceberg-ingestion for real: Dagster deploys the Flink job, Avro orders and poison records go into `orders`,
the good ones land in Iceberg default.orders exactly once with their decimal prices, the bad ones in the Flink
dead-letter topic with a reason, and the job keeps running."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
import uuid
from decimal import Decimal

import dagster as dg
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from lineage_assets.connect.assets import ORDERS_TOPIC
from lineage_assets.flink.client import FlinkClient
from lineage_assets.flink.deploy import require_source_topic
from lineage_assets.flink.iceberg_ingestion_asset import DLQ_TOPIC, JOB, build_iceberg_ingestion_asset
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.topics import end_offsets, ensure_topic
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.tunables import PipelineTunables

N = 200
#: where this module's writer schema is registered when the CDC connector has not registered orders-value yet
TEST_SUBJECT = "lineage-lab-tests-orders-value"
ORDER_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "lineage_lab",
    "fields": [
        {"name": "supplier", "type": "string"},
        {"name": "item", "type": "string"},
        {"name": "price", "type": "string"},
        {"name": "bid_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "order_id", "type": "string"},
    ],
}


@pytest.fixture(scope="module")
def instance():
    with dg.DagsterInstance.ephemeral() as inst:
        yield inst


@pytest.fixture(scope="module")
def deployed(settings, resources, instance):
    ensure_topic(settings.kafka_bootstrap, ORDERS_TOPIC)
    asset = build_iceberg_ingestion_asset(Pipeline.from_settings(settings), PipelineTunables.from_settings(settings))
    result = dg.materialize([asset], resources=resources, instance=instance)
    assert result.success
    yield asset, result
    client = FlinkClient(settings)
    job = client.active(JOB)
    if job:
        client.cancel(job.jid)


def serializer(settings) -> AvroSerializer:
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    conf: dict = {"auto.register.schemas": False}
    try:  # write with whatever orders-value holds (Debezium registers it); the job decodes any writer schema
        schema_str = registry.get_latest_version("orders-value").schema.schema_str
    except Exception:
        # no CDC schema yet: register ours under a subject of its own. The job decodes by schema id, whatever the
        # subject; a schema of ours in orders-value would make the CDC connector's own registration incompatible
        schema_str = json.dumps(ORDER_SCHEMA)
        registry.register_schema(TEST_SUBJECT, Schema(schema_str, "AVRO"))
        conf["subject.name.strategy"] = lambda ctx, record_name: TEST_SUBJECT
    return AvroSerializer(registry, schema_str, conf=conf)


def test_a_missing_source_topic_fails_the_deploy_naming_the_asset_that_creates_it(settings):
    topic = f"lineage-lab-tests-missing-{uuid.uuid4().hex}"
    kafka = KafkaConnection(settings.kafka_bootstrap)
    with pytest.raises(dg.Failure, match=rf"topic '{topic}' does not exist at .*: materialize kafka/orders first"):
        require_source_topic(kafka, topic, "kafka/orders")
    assert end_offsets(kafka, topic) == {}, "asking for the topic did not create it"


def test_good_orders_land_once_and_bad_ones_are_dead_lettered(settings, resources, deployed):
    serialize = serializer(settings)
    ctx = SerializationContext("orders", MessageField.VALUE)
    bid = dt.datetime.now(dt.UTC).replace(microsecond=0)  # inside the valid-order rule's plausibility window
    orders = {f"t-{uuid.uuid4()}": Decimal(100 + i) / Decimal(7) for i in range(N)}
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
    for order_id, price in orders.items():
        value = {"order_id": order_id, "supplier": "Alice", "item": "Lamp", "price": f"{price:.2f}", "bid_time": bid}
        producer.produce("orders", key=order_id, value=serialize(value, ctx))
    poison_key = f"poison-{uuid.uuid4()}"
    bad_price = {"order_id": "bad-price", "supplier": "Bob", "item": "Pen", "price": "abc", "bid_time": bid}
    producer.produce("orders", key=poison_key, value=b"definitely not avro")
    producer.produce("orders", key=poison_key, value=b"\x00\x00\x0f\x42\x3f" + b"unknown schema id")
    producer.produce("orders", key=poison_key, value=serialize(bad_price, ctx))
    assert producer.flush(30) == 0

    table = resources["iceberg"].catalog().load_table("default.orders")
    found: dict[str, list[Decimal]] = {}
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        table = table.refresh()
        rows = table.scan(row_filter="order_id LIKE 't-%'", selected_fields=("order_id", "price")).to_arrow()
        found = {}
        for r in rows.to_pylist():
            if r["order_id"] in orders:
                found.setdefault(r["order_id"], []).append(r["price"])
        if len(found) == N:
            break
        time.sleep(3)
    assert set(found) == set(orders), f"{len(found)}/{N} orders in Iceberg"
    assert all(len(v) == 1 for v in found.values()), "each order exactly once"
    assert {k: v[0] for k, v in found.items()} == {k: p.quantize(Decimal("0.01")) for k, p in orders.items()}

    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"t-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([DLQ_TOPIC.name])
    reasons = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(reasons) < 3:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            record = json.loads(msg.value())
            if record["record_key"] == poison_key:
                reasons.append(record["reason"])
    consumer.close()
    assert len(reasons) == 3, reasons
    assert any(r.startswith("not Confluent wire format") for r in reasons)
    assert any("unknown schema id" in r for r in reasons)
    assert any("unparsable price 'abc'" in r for r in reasons)
    assert FlinkClient(settings).active(JOB).state == "RUNNING", "bad records never stop the job"


def test_materializing_again_changes_nothing(settings, resources, deployed, instance):
    asset, first = deployed
    jid = first.asset_materializations_for_node("iceberg__default__orders")[0].metadata["flink_job_id"].value
    again = dg.materialize([asset], resources=resources, instance=instance)
    meta = again.asset_materializations_for_node("iceberg__default__orders")[0].metadata
    assert meta["flink_job_id"].value == jid
    assert meta["deployment"].value.startswith("unchanged")
    assert [j.jid for j in FlinkClient(settings).jobs() if j.name == JOB and j.state == "RUNNING"] == [jid]


def run_events(resources, deployed) -> list[dict]:
    """The events of the deployed job's run in the module's outbox (the sensor also closes other instances' stale
    runs of the job name there)."""
    run_id = deployed[1].asset_materializations_for_node("iceberg__default__orders")[0].metadata["openlineage/run_id"]
    with sqlite3.connect(resources["lineage"].outbox_path) as db:
        events = [json.loads(p) for (p,) in db.execute("SELECT payload FROM events ORDER BY seq")]
    return [e for e in events if e["run"]["runId"] == run_id.value]


def test_manual_lineage_names_the_table_spark_reads(settings, resources, deployed):
    pipeline = Pipeline.from_settings(settings)
    events = run_events(resources, deployed)
    assert [e["eventType"] for e in events] == ["START", "RUNNING"]
    target = pipeline.dataset("iceberg_orders")
    # the job's datasets as Flink reports them: its listener names the table by its catalog, spelled by location
    (out,) = [o for o in events[1]["outputs"] if (o["namespace"], o["name"]) == (target.namespace, target.name)]
    assert out["facets"]["columnLineage"]["fields"]["price"]["inputFields"][0]["name"] == "orders"
    assert events[1]["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert events[0]["run"]["runId"] == events[1]["run"]["runId"]


def test_sensor_closes_the_run_when_the_job_is_cancelled(settings, resources, deployed, instance):
    from lineage_assets.flink.sensor import build_flink_job_sensor

    sensor = build_flink_job_sensor(Pipeline.from_settings(settings), settings.streaming_fresh_minutes)

    def evaluate(cursor):
        with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult), result
        return result

    first = evaluate(None)
    # the sensor follows every pipeline job on the cluster: this module's is the one of iceberg/default/orders
    (obs,) = [
        e
        for e in first.asset_events
        if isinstance(e, dg.AssetObservation) and e.asset_key.to_user_string() == "iceberg/default/orders"
    ]
    assert obs.metadata["state"].value == "RUNNING"
    assert obs.metadata["dagster/row_count"].value >= N
    assert any(isinstance(e, dg.AssetMaterialization) for e in first.asset_events), "a snapshot is a materialization"

    client = FlinkClient(settings)
    job = client.active(JOB)
    client.cancel(job.jid)
    deadline = time.monotonic() + 60
    while client.job(job.jid).state != "CANCELED" and time.monotonic() < deadline:
        time.sleep(1)
    second = evaluate(first.cursor)
    evaluate(second.cursor)  # a later tick must not close the run again

    events = run_events(resources, deployed)
    assert [e["eventType"] for e in events] == ["START", "RUNNING", "ABORT"], "opened once, closed once"
    target = Pipeline.from_settings(settings).dataset("iceberg_orders")
    assert (target.namespace, target.name) in {(o["namespace"], o["name"]) for o in events[2]["outputs"]}
