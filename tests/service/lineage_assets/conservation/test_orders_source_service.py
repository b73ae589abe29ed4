"""The orders-source hop against the running stack, judged by independent readers: ``SELECT count(*)`` of the source
table (psycopg) and a read-committed consumer counting the records of ``orders`` that carry Debezium's header."""

from __future__ import annotations

import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from infra.settings import StackSettings
from lineage_assets.conservation import orders_source
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.store import CountStore
from lineage_assets.conservation.stores import Stores, count_store_path
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources

pytestmark = pytest.mark.service

DEADLINE_S = 240


@pytest.fixture()
def stores(tmp_path):
    settings = StackSettings.from_env()
    pipeline = Pipeline.from_settings(settings)
    wanted = {k: v for k, v in build_resources(settings).items() if k in ("kafka", "source_db", "connect")}
    with dg.build_resources(wanted) as res:
        built = Stores(pipeline, res, count_store_path(settings))
        built.counts = CountStore(tmp_path / "c.sqlite")
        yield built


def judge(stores: Stores) -> tuple[int, int, int]:
    """(rows of the table, records with Debezium's context header, other records), read without the reader."""
    with stores.resources.source_db.connect() as conn:
        (rows,) = conn.execute("SELECT count(*) FROM public.orders").fetchone()
    consumer = Consumer(
        stores.resources.kafka.connection().client_config(
            **{
                "group.id": f"test-orders-source-{uuid.uuid4().hex[:8]}",
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


def settled_balance(stores: Stores):
    """The hop's balance at a moment nothing moved: the judge reads the same before and after it."""
    hop = hops(stores.pipeline)["orders-source"]
    deadline = time.monotonic() + DEADLINE_S
    while True:
        before = judge(stores)
        found = orders_source.balance(hop, stores)
        after = judge(stores)
        if (before == after and before[0] == before[1]) or time.monotonic() > deadline:
            return found, after
        time.sleep(3)


def test_balances_and_names_another_writer(stores):
    """Another writer's records count in ``out`` (HopBalance's contract): unaccepted, they are duplicates."""
    found, (rows, debezium, foreign) = settled_balance(stores)
    assert (found.in_, found.out, found.dead_letters, found.pending) == (rows, debezium + foreign, 0, 0)
    assert (found.status, found.duplicates) == ("duplicates" if foreign else "balanced", foreign), found.summary()
    assert sum(w.rows for w in found.other_writers) == foreign

    producer = Producer(stores.resources.kafka.connection().client_config())
    for i in range(2):
        producer.produce("orders", key=f"not-an-order-{i}".encode(), value=b"\x00garbage from another writer")
    assert producer.flush(30) == 0

    found, (rows, debezium, foreign_now) = settled_balance(stores)
    assert foreign_now == foreign + 2
    assert (found.in_, found.out, found.pending) == (rows, debezium + foreign + 2, 0)
    assert (found.status, found.duplicates) == ("duplicates", foreign + 2), found.summary()
    (writer,) = found.other_writers
    assert writer.rows == foreign + 2
    assert writer.output == "kafka://127.0.0.1:9092/orders"
    assert writer.what.startswith(f"{foreign + 2} records produced by another writer")
    assert "orders offsets " in writer.what and writer.ref.startswith("records:orders:")
