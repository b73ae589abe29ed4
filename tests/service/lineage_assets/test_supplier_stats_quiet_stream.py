"""supplier-stats on a quiet stream, deployed as the stack deploys it: 30 orders for a new supplier, then silence.
Every one is counted, exactly, although no later order moves the event-time clock (the quiet advance closes their
windows; how soon, against window + out-of-orderness + quiet advance + one checkpoint, is
benchmarks/quiet_stream_latency.py's figure); an order older than that clock, sent afterwards, is dead-lettered as
late with its reason and counted in no window (conservation holds)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from infra.settings import StackSettings
from lineage_assets.connect.assets import ORDERS_TOPIC
from lineage_assets.definitions import build_definitions
from lineage_assets.flink import supplier_stats_stream_asset
from lineage_assets.flink.client import FlinkClient
from lineage_assets.metadata import asset_key
from tests.service.lineage_assets.conftest import after_everything_in_orders
from tests.support.order_stream import assert_windows_equal, counted, expected_windows, windows_complete
from tests.support.supplier_stats_job import Topic, job_figures

defs = build_definitions(StackSettings.from_env())

ORDERS = 30
#: a failure detector only: the quiet advance never closed the windows
DEADLINE = 240


@pytest.fixture(scope="module")
def deployed(settings, stack_instance, pipeline) -> dict:
    """The stack's supplier-stats, (re)deployed with this code and its default settings; the job's figures."""
    result = dg.materialize(
        [*defs.assets],
        selection=dg.AssetSelection.assets(asset_key(pipeline.dataset("kafka_supplier_stats"))),
        resources=defs.resources,
        instance=stack_instance,
        tags={"lineage-lab/step": "test_supplier_stats_quiet_stream deploy"},
        raise_on_error=False,
    )
    assert result.success
    jid = result.asset_materializations_for_node("kafka__supplier_stats")[0].metadata["flink_job_id"].value
    # Not waited for: the idleness after a (re)start. A partition that has delivered no order since the start holds
    # the job's clock for that long; the 30 orders reach each of the 3 partitions but with a chance of about 2e-5,
    # and even then the windows close after it, well inside DEADLINE. Only how soon depends on it (the benchmark's).
    assert FlinkClient(settings).job(jid).state == "RUNNING"
    return job_figures(settings, jid)


def test_a_quiet_stream_counts_every_order_and_a_late_one_is_dead_lettered(settings, deployed, pipeline):
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    serialize = AvroSerializer(
        registry, registry.get_latest_version("orders-value").schema.schema_str, conf={"auto.register.schemas": False}
    )
    orders_ctx = SerializationContext(ORDERS_TOPIC.name, MessageField.VALUE)
    output = pipeline.dataset("kafka_supplier_stats").name
    stats_ctx = SerializationContext(output, MessageField.VALUE)
    deserialize = AvroDeserializer(registry)
    token = uuid.uuid4().hex[:10]
    supplier = f"Quiet-{token}"
    stats = Topic(settings, output)
    dead = Topic(settings, supplier_stats_stream_asset.DLQ_TOPIC.name)
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 5})

    def order(n: int, bid: dt.datetime) -> dict:
        return {"order_id": f"quiet-{token}-{n}", "supplier": supplier, "item": "Lamp", "price": f"{n + 1}.25",
                "bid_time": bid}  # fmt: skip

    # bid_times after everything in the topic (earlier tests' orders may lie ahead of processing time), keyed by
    # order id like the source connector: they spread over the partitions
    start = after_everything_in_orders(settings)
    sent = [order(n, start + dt.timedelta(milliseconds=150 * n)) for n in range(ORDERS)]
    for o in sent:
        producer.produce(ORDERS_TOPIC.name, key=o["order_id"], value=serialize(o, orders_ctx))
    assert producer.flush(30) == 0
    # then silence: no order of any kind from this test. No later order moves the event-time clock, so only the
    # quiet advance can close their windows; DEADLINE only detects that it never does (how soon it does is
    # benchmarks/quiet_stream_latency.py's figure, against the bound the job's settings give)
    deadline = time.monotonic() + DEADLINE

    def window_of(msg):
        value = deserialize(msg.value(), stats_ctx)
        key = (value["window_start"], value["supplier"])
        return (key, (value["total_price"], value["count"])) if value["supplier"] == supplier else None

    expected = expected_windows({o["order_id"]: o for o in sent})
    windows = stats.read(window_of, lambda found: windows_complete(found, expected), deadline)
    assert counted(windows) == ORDERS, (
        f"{counted(windows)} of {ORDERS} counted after {DEADLINE} s of silence: {windows}"
    )
    assert_windows_equal(windows, expected)

    # a late order: older than the event-time clock that closed the windows above
    late = order(ORDERS, start - dt.timedelta(seconds=60))
    producer.produce(ORDERS_TOPIC.name, key=late["order_id"], value=serialize(late, orders_ctx))
    assert producer.flush(30) == 0

    def letter(msg):
        value = json.loads(msg.value())
        return value["reason"] if late["order_id"].encode() in base64.b64decode(value["raw_value"]) else None

    reasons = dead.read(letter, bool, time.monotonic() + 120)
    bid_text = late["bid_time"].strftime("%Y-%m-%dT%H:%M:%SZ")
    assert reasons and reasons[0].startswith(f"late: bid_time {bid_text} arrived after its window closed"), reasons
    assert "event time already at" in reasons[0], reasons
    # the late letter and any window it would have changed are committed by the same checkpoint: none for it. Read
    # for one more checkpoint: reading the output to its end is no decision here, as a transaction a killed
    # TaskManager left open (an earlier test) holds read-committed readers back until the broker times it out
    again = stats.read(window_of, lambda _: False, time.monotonic() + deployed["CHECKPOINT_INTERVAL_MS"] / 1000 + 5)
    assert not again, f"the late order changed no window: {again}"
    stats.close()
    dead.close()
