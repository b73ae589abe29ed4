"""Every hop balances after faults mid-stream (issue 26). Orders stream in through the source table and straight
into `orders` (hostile records among them) while the Flink TaskManager is SIGKILLed, the Connect worker is
SIGKILLed and the object store is down for 60 s. Once the stream is quiet, `reconcile` must report every hop
balanced: nothing missing, nothing doubled, nothing left pending. Judged independently too: each of the test's
orders is exactly once in Iceberg (a pyiceberg scan) and in the archive (the objects read by the test).

The source inserts go on while the Connect worker is killed: Debezium runs under Connect's exactly-once source
support, so the transaction the worker was writing is aborted and its changes written again once, and every
reader of `orders` reads committed. The test's own read-committed consumer judges that hop: each inserted order is
in `orders` exactly once. The other writers that earlier tests left in the outputs (rows written into Iceberg on
purpose, records produced into `supplier-stats`) are accepted first, as a person would after reviewing them.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections import Counter

import dagster as dg
import psycopg
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.expressions import StartsWith

from infra import supervisor
from infra.services.base import port_open, read_pid
from infra.services.flink import FlinkTaskManager
from infra.services.kafka_connect import KafkaConnect
from infra.services.object_store import ObjectStore
from lineage_assets.conservation.reconcile import accept, reconcile
from lineage_assets.conservation.stores import RESOURCE_KEYS, Stores, count_store_path
from lineage_assets.kafka.topics import end_offsets
from lineage_assets.resources import build_resources

pytestmark = pytest.mark.service

SUPPLIERS = ["Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack"]


@pytest.fixture(scope="module")
def stores(settings, pipeline):
    wanted = {k: v for k, v in build_resources(settings).items() if k in RESOURCE_KEYS}
    with dg.build_resources(wanted) as resources:
        yield Stores(pipeline, resources, count_store_path(settings))


def accept_earlier_writers(stores: Stores) -> None:
    for hop in reconcile(stores, confirm_after_s=0):
        if hop.other_writers:
            accept(stores, hop.job, [w.reference for w in hop.other_writers], by="test_faults_mid_stream")


def kill_and_restart(service) -> None:
    pid = read_pid(service)
    assert pid is not None, f"{service.name} runs"
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    # SIGKILL is delivered asynchronously, and a JVM's threads hold its ports a moment after its leader died
    while time.monotonic() < deadline and (
        read_pid(service) is not None or any(port_open(service.settings.host, p) for p in service.ports)
    ):
        time.sleep(0.2)
    supervisor.start(service, log=lambda _: None)
    assert read_pid(service) not in (None, pid), f"a new {service.name} process runs"


def read_order_keys(settings, start: dict[int, int]) -> list[str]:
    """The keys (order ids) of the committed records of `orders` from ``start`` to its end (a consumer of the
    test's own: read committed, as every reader of the pipeline)."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"judge-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    keys, open_partitions = [], set(start)
    try:
        consumer.assign([TopicPartition("orders", p, o) for p, o in start.items()])
        while open_partitions:
            msg = consumer.poll(10)
            assert msg is not None, "orders did not answer"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                open_partitions.discard(msg.partition())
            elif msg.key() is not None:
                keys.append(msg.key().decode())
    finally:
        consumer.close()
    return keys


class Stream(threading.Thread):
    """Writes until stopped, counting what it wrote; a failure is kept and raised by ``finish``."""

    def __init__(self, write) -> None:
        super().__init__(daemon=True)
        self.write, self.stop, self.written, self.error = write, threading.Event(), [], None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.written += self.write(len(self.written))
        except Exception as exc:  # reported by finish()
            self.error = exc

    def finish(self) -> list:
        self.stop.set()
        self.join(120)
        if self.error:
            raise self.error
        return self.written


@pytest.mark.timeout(1200)  # minutes in CI: the default service limit would leave too little room
def test_every_hop_balances_after_kills_and_an_object_store_outage_mid_stream(settings, stores):
    accept_earlier_writers(stores)
    token = f"cons-{uuid.uuid4().hex[:10]}"
    start_offsets = end_offsets(settings.kafka_bootstrap, "orders")

    def insert_source(n: int) -> list[str]:
        ids = [f"{token}-s-{n + i}" for i in range(20)]
        with psycopg.connect(
            host=settings.postgres_address[0],
            port=settings.postgres_address[1],
            dbname="orders_source",
            user="orders",
            password=settings.source_db_password,
            autocommit=True,
        ) as conn:
            conn.cursor().executemany(
                "INSERT INTO public.orders (order_id, supplier, item, price, bid_time) "
                "VALUES (%s, %s, 'Lamp', '12.50', now() AT TIME ZONE 'UTC')",
                [(i, SUPPLIERS[k % 8]) for k, i in enumerate(ids)],
            )
        time.sleep(0.2)
        return ids

    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    serialize = AvroSerializer(
        registry, registry.get_latest_version("orders-value").schema.schema_str, conf={"auto.register.schemas": False}
    )
    ctx = SerializationContext("orders", MessageField.VALUE)
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 20})

    def produce_direct(n: int) -> list[str]:
        ids = []
        for i in range(n, n + 50):
            if i % 25 == 7:  # hostile: not an Avro order at all
                producer.produce("orders", key=f"{token}-junk-{i}", value=f"junk-{token}-{i}".encode())
                ids.append(f"junk:{i}")
                continue
            order_id = f"{token}-d-{i}"
            value = {
                "order_id": order_id,
                "supplier": SUPPLIERS[i % 8],
                "item": "Pen",
                "price": "3.25",
                "bid_time": time.time_ns() // 1_000_000,
                "currency": None,
            }
            producer.produce("orders", key=order_id, value=serialize(value, ctx))
            ids.append(order_id)
        assert producer.flush(60) == 0
        time.sleep(0.1)
        return ids

    source, direct = Stream(insert_source), Stream(produce_direct)
    source.start()
    direct.start()
    try:
        time.sleep(8)
        kill_and_restart(FlinkTaskManager(settings))
        time.sleep(5)
        kill_and_restart(KafkaConnect(settings))  # mid-transaction: inserts are still going on
        time.sleep(5)
        store = ObjectStore(settings)
        supervisor.stop(store)
        try:
            time.sleep(60)
        finally:
            supervisor.start(store, log=lambda _: None)
        time.sleep(5)
    finally:
        inserted = source.finish()
        produced = direct.finish()
    valid = [i for i in produced if not i.startswith("junk:")]
    assert inserted and valid and len(produced) > len(valid), "the stream ran, hostile records among it"

    # every hop balanced once nothing is pending any more
    deadline = time.monotonic() + 900
    while True:
        found = reconcile(stores)
        # the test's own records straight into orders count on orders-source (HopBalance's contract): intended
        direct = [w.reference for b in found if b.job == "orders-source" for w in b.other_writers]
        if direct:
            accept(stores, "orders-source", direct, by="test_faults_mid_stream")
            found = reconcile(stores)
        settled = all(b.status == "balanced" for b in found)
        if settled or time.monotonic() > deadline:
            break
        time.sleep(20)
    assert settled, "\n".join(b.summary() for b in found)
    assert {b.job for b in found} == {
        "orders-source",
        "orders-s3-sink",
        "supplier-stats",
        "iceberg-ingestion",
        "dagster.supplier_stats",
    }

    # the independent judges: each order of the test once in `orders` (read committed), in Iceberg and in the archive
    in_topic = Counter(i for i in read_order_keys(settings, start_offsets) if i.startswith(token))
    assert {i for i in in_topic if "-junk-" not in i} == set(inserted) | set(valid)
    assert {i: n for i, n in in_topic.items() if n != 1} == {}, "a record twice in orders"
    table = stores.catalog.load_table("default.orders")
    in_iceberg = Counter(table.scan(row_filter=StartsWith("order_id", token)).to_arrow()["order_id"].to_pylist())
    assert set(in_iceberg) == set(inserted) | set(valid)
    assert set(in_iceberg.values()) == {1}, "an order twice in Iceberg"

    archived: Counter = Counter()
    s3 = stores.s3
    for partition, offset in start_offsets.items():
        prefix = f"topics/orders/partition={partition}/"
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.archive_bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                first = int(obj["Key"].rsplit("+", 1)[1].removesuffix(".jsonl"))
                if first + 200 < offset:  # objects hold at most flush.size (100) records
                    continue
                body = s3.get_object(Bucket=settings.archive_bucket, Key=obj["Key"])["Body"].read().decode()
                for line in body.splitlines():
                    order_id = json.loads(line).get("order_id") or ""
                    if order_id.startswith(token):
                        archived[order_id] += 1
    assert set(archived) == set(inserted) | set(valid)
    assert set(archived.values()) == {1}, "an order twice in the archive"
