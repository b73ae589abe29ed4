"""supplier-stats on a quiet stream, deployed as the stack deploys it: 30 orders for a new supplier, then silence.
Every one is counted within window + out-of-orderness + the quiet-advance setting + one checkpoint (the figures read
from the deployed job, its script's constants and its arguments), although no later order moves the event-time
clock; an order older than that clock, sent afterwards, is dead-lettered as late with its reason and counted in no
window (conservation holds)."""

from __future__ import annotations

import ast
import base64
import datetime as dt
import itertools
import json
import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from flink_jobs import deployment
from infra.settings import StackSettings
from lineage_assets.connect.assets import ORDERS_TOPIC
from lineage_assets.definitions import build_definitions
from lineage_assets.flink import supplier_stats_stream_asset
from lineage_assets.flink.client import FlinkClient
from lineage_assets.metadata import asset_key
from tests.service.lineage_assets.conftest import after_everything_in_orders

defs = build_definitions(StackSettings.from_env())

ORDERS = 30


def script_constants() -> dict[str, int]:
    """The job's windowing constants, read from its script (the driver imports PyFlink, not installed here)."""
    tree = ast.parse(supplier_stats_stream_asset.SPEC.script.read_text())
    return {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.endswith("_MS")
    }


def job_arguments(settings, jid: str) -> dict[str, str]:
    """The deployed job's program arguments (``--name value``), as it records them in its job parameters."""
    args = deployment.decode_args(FlinkClient(settings).user_config(jid).get(deployment.ARGS, "")) or []
    return {name: value for name, value in itertools.pairwise(args) if name.startswith("--")}


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
    args = job_arguments(settings, jid)
    figures = {**script_constants(), "jid": jid}
    figures["QUIET_ADVANCE_MS"] = int(args["--quiet-advance-ms"])
    figures["CHECKPOINT_INTERVAL_MS"] = int(args["--checkpoint-interval-ms"])
    # steady state: a job just started holds its clock for the idleness on a partition that has not delivered an
    # order yet (a backlog there is not made late), so the silence is looked at after that
    client = FlinkClient(settings)
    started_ms = client.job(jid).start_time_ms
    while time.time() * 1000 < started_ms + figures["IDLENESS_MS"] + 1000:
        time.sleep(1)
    assert client.job(jid).state == "RUNNING"
    return figures


class Topic:
    """An independent reader of a topic's committed records from its end at creation on."""

    def __init__(self, settings, topic: str):
        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.kafka_bootstrap,
                "group.id": f"t-{uuid.uuid4()}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        partitions = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        self.consumer.assign([TopicPartition(topic, p, end) for p, end in ends.items()])

    def read(self, want, done, deadline: float) -> list:
        found: list = []
        while not done(found) and time.monotonic() < deadline:
            msg = self.consumer.poll(0.5)
            if msg is not None and not msg.error():
                item = want(msg)
                if item is not None:
                    found.append(item)
        return found

    def close(self) -> None:
        self.consumer.close()


def test_a_quiet_stream_counts_every_order_in_time_and_a_late_one_is_dead_lettered(settings, deployed, pipeline):
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
    within_ms = (
        deployed["WINDOW_MS"]
        + deployed["OUT_OF_ORDERNESS_MS"]
        + deployed["QUIET_ADVANCE_MS"]
        + deployed["CHECKPOINT_INTERVAL_MS"]
    )
    deadline = time.monotonic() + within_ms / 1000  # then silence: no order of any kind from this test

    def window_of(msg):
        value = deserialize(msg.value(), stats_ctx)
        return (value["window_start"], value["count"], value["total_price"]) if value["supplier"] == supplier else None

    windows = stats.read(window_of, lambda found: sum(c for _, c, _ in found) >= ORDERS, deadline)
    counted = sum(c for _, c, _ in windows)
    assert counted == ORDERS, (
        f"{counted} of {ORDERS} orders counted within {within_ms / 1000:.0f} s of silence "
        f"(window + out-of-orderness + quiet advance + checkpoint): {windows}"
    )
    expected: dict[str, tuple[int, float]] = {}
    for o in sent:
        window_start = o["bid_time"].replace(second=o["bid_time"].second // 5 * 5, microsecond=0)
        count, total = expected.get(window_start.strftime("%Y-%m-%dT%H:%M:%SZ"), (0, 0.0))
        expected[window_start.strftime("%Y-%m-%dT%H:%M:%SZ")] = (count + 1, round(total + float(o["price"]), 2))
    assert {w: (c, round(t, 2)) for w, c, t in windows} == expected, "one record per window, exact"
    assert len(windows) == len(expected)

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
    # the late letter and any window it would have changed are committed by the same checkpoint: none for it
    again = stats.read(window_of, lambda _: False, time.monotonic() + deployed["CHECKPOINT_INTERVAL_MS"] / 1000 + 5)
    assert not again, f"the late order changed no window: {again}"
    stats.close()
    dead.close()
