"""What the conservation service tests share: the stores a reconciliation reads (with a private count store, so a
test starts from nothing remembered and never moves the stack's), and the judges' own Kafka readers."""

from __future__ import annotations

import uuid
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from confluent_kafka import Consumer, KafkaError, TopicPartition

from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.stores import RESOURCE_KEYS, Stores, count_store_path
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import opened_resources


@pytest.fixture(scope="module", autouse=True)
def pipeline_has_data(flink_jobs_run) -> None:
    """Every hop has records, objects, windows and a summarised day to reconcile: the main job ran once (on a
    fresh stack, these tests are the first to need it), and both Flink jobs run (whatever a module before left)."""


def private_stores(settings, pipeline: Pipeline, folder: Path) -> Stores:
    """The deployment's stores read for ``pipeline`` (opened as the CLI opens them), remembering counts in a private
    store under ``folder``: a test starts from nothing remembered and never moves the stack's."""
    found = Stores(pipeline, opened_resources(settings, RESOURCE_KEYS), count_store_path(settings))
    found.counts = CountStore(folder / "counts.sqlite")
    return found


@pytest.fixture(scope="module")
def stores(settings, tmp_path_factory) -> Stores:
    """The deployment's stores, remembering counts in a private store of the test module."""
    return private_stores(settings, Pipeline.from_settings(settings), tmp_path_factory.mktemp("counts"))


@pytest.fixture(scope="module")
def s3(settings):
    """A boto3 client of the tests' own (not the resource's): the judges read the archive themselves."""
    return boto3.client(
        "s3",
        endpoint_url=settings.s3_endpoint,
        aws_access_key_id=settings.s3_access_key,
        aws_secret_access_key=settings.s3_secret_key,
        region_name=settings.s3_region,
        config=Config(s3={"addressing_style": "path"}),
    )


def judge_consumer(settings, **extra) -> Consumer:
    """A read-committed consumer of the test's own (never the product's reader)."""
    return Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"test-conservation-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            **extra,
        }
    )


def group_committed(settings, topic: str, group: str) -> dict[int, int]:
    """partition -> the consumer group's committed offset on ``topic`` (0 when none)."""
    probe = judge_consumer(settings)
    try:
        partitions = sorted(probe.list_topics(topic, timeout=10).topics[topic].partitions)
    finally:
        probe.close()
    member = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = member.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
    finally:
        member.close()
    return {tp.partition: max(tp.offset, 0) for tp in found}


def order_records(settings, start: dict[int, int]) -> tuple[list[str], dict[int, int]]:
    """The keys (order ids) of the committed records of `orders` from ``start`` to its end, and per partition the
    offset after its last record (a consumer of the test's own: read committed, as every reader of the pipeline).
    The end offset can lie past that: a transaction's commit marker takes an offset, and no reader commits past it."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"judge-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    keys, after_last, open_partitions = [], {}, set(start)
    try:
        consumer.assign([TopicPartition("orders", p, o) for p, o in start.items()])
        while open_partitions:
            msg = consumer.poll(10)
            assert msg is not None, "orders did not answer"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                open_partitions.discard(msg.partition())
                continue
            after_last[msg.partition()] = msg.offset() + 1
            if msg.key() is not None:
                keys.append(msg.key().decode())
    finally:
        consumer.close()
    return keys, after_last


def orders_below(settings, cut: dict[int, int]) -> int:
    """Committed records of ``orders`` below ``cut``, counted by a consumer of the test's own."""
    consumer = judge_consumer(settings)
    found, open_partitions = 0, {p for p, o in cut.items() if o > 0}
    try:
        consumer.assign([TopicPartition("orders", p, 0) for p in open_partitions])
        while open_partitions:
            msg = consumer.poll(10)
            assert msg is not None, "orders did not answer"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                open_partitions.discard(msg.partition())
                continue
            if msg.offset() < cut[msg.partition()]:
                found += 1
            if msg.offset() + 1 >= cut[msg.partition()]:
                open_partitions.discard(msg.partition())
                consumer.incremental_unassign([TopicPartition("orders", msg.partition())])
    finally:
        consumer.close()
    return found


def committed_past(settings, group: str, after_last: dict[int, int]) -> dict[int, tuple[int, int]]:
    """The partitions where ``group`` has not committed past the last record: partition -> (committed, wanted)."""
    committed = group_committed(settings, "orders", group)
    return {p: (committed.get(p, 0), o) for p, o in after_last.items() if committed.get(p, 0) < o}


def judge_orders_source(stores: Stores) -> tuple[int, int, int]:
    """(rows of the table, records with Debezium's context header, other records), read without the reader."""
    with stores.resources.source_db.connect() as conn:
        (rows,) = conn.execute("SELECT count(*) FROM public.orders").fetchone()
    consumer = Consumer(
        stores.resources.kafka.connection().client_config(
            **{
                "group.id": f"test-orders-source-judge-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )
    )
    debezium = foreign = 0
    try:
        partitions = consumer.list_topics("orders", timeout=10).topics["orders"].partitions
        consumer.assign([TopicPartition("orders", p, 0) for p in partitions])
        open_partitions = set(partitions)
        while open_partitions:
            msg = consumer.poll(10)
            assert msg is not None, "the broker stopped answering while the test counted orders"
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                open_partitions.discard(msg.partition())
                continue
            headers = dict(msg.headers() or [])
            if headers.get("__debezium.context.connectorLogicalName") == b"orders_source":
                debezium += 1
            else:
                foreign += 1
    finally:
        consumer.close()
    return rows, debezium, foreign
