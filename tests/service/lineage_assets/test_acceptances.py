"""Accepting and revoking another writer on the orders-source hop against the running stack: records produced
straight into ``orders`` (confluent-kafka, partition 0) are named by ``reconcile``, accepted up to their last offset,
named again when more arrive, and counted again when revoked. The expected figures come from the test's own readers:
``SELECT count(*)`` of the source table, a read-committed consumer of ``orders`` and the producer's delivery reports
(partition, offset). The count store is the test's own, so the stack's acceptances are never touched."""

from __future__ import annotations

import time
import uuid

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from infra.settings import StackSettings
from lineage_assets.conservation import reconcile as rec
from lineage_assets.conservation.acceptances import AcceptanceError
from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.store import CountStore
from lineage_assets.conservation.stores import Stores, count_store_path
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources

pytestmark = pytest.mark.service

JOB = "orders-source"
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
                "group.id": f"test-acceptances-{uuid.uuid4().hex[:8]}",
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


def settled(stores: Stores) -> tuple[HopBalance, tuple[int, int, int]]:
    """``reconcile``'s balance of the hop at a moment nothing moved: the judge reads the same before and after."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        before = judge(stores)
        (found,) = rec.reconcile(stores, [JOB], confirm_after_s=0)
        after = judge(stores)
        if (before == after and before[0] == before[1]) or time.monotonic() > deadline:
            return found, after
        time.sleep(3)


def produce(stores: Stores, n: int) -> list[int]:
    """``n`` records straight into orders[0], without Debezium's headers; their offsets, from the delivery reports."""
    producer = Producer(stores.resources.kafka.connection().client_config())
    offsets: list[int] = []

    def delivered(err, msg) -> None:
        assert err is None, err
        offsets.append(msg.offset())

    for i in range(n):
        producer.produce("orders", key=f"bench-{i}".encode(), value=b"benchmark", partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0 and len(offsets) == n
    return sorted(offsets)


def test_a_producer_in_orders_is_named_accepted_named_again_and_revoked(stores):
    found, (rows, debezium, earlier) = settled(stores)
    # other writers an earlier test left: counted in out, then accepted, so the test starts from a balanced hop
    assert (found.in_, found.out, found.duplicates) == (rows, debezium + earlier, earlier), found.summary()
    if earlier:
        rec.accept(stores, JOB, [w.reference for w in found.other_writers], by="test")
        found, (rows, debezium, _) = settled(stores)
    assert (found.out, found.status, found.other_writers) == (debezium, "balanced", ()), found.summary()

    first = produce(stores, 5)
    found, (rows, debezium, foreign) = settled(stores)
    assert foreign == earlier + 5
    (named,) = found.other_writers
    ref = f"records:orders:0@{first[0]}"
    assert (named.reference, named.position, named.rows) == (ref, f"0@{first[-1]}", 5)
    assert (found.in_, found.out, found.status, found.duplicates) == (rows, debezium + 5, "duplicates", 5)

    (made,) = rec.accept(stores, JOB, [ref], by="test")
    assert (made.ref, made.position, made.by) == (ref, f"0@{first[-1]}", "test")
    found, (rows, debezium, _) = settled(stores)
    assert (found.in_, found.out, found.status, found.other_writers) == (rows, debezium, "balanced", ())
    assert ref in [w.reference for w in found.accepted]
    assert ref in [a.ref for a in rec.accepted_of(stores, JOB)]

    later = produce(stores, 2)  # the same producer goes on: its new records are not covered
    found, (rows, debezium, foreign) = settled(stores)
    assert foreign == earlier + 7
    (again,) = found.other_writers
    assert (again.reference, again.position, again.rows) == (f"records:orders:0@{later[0]}", f"0@{later[-1]}", 2)
    assert (found.out, found.duplicates) == (debezium + 2, 2)

    (undone,) = rec.revoke(stores, JOB, [ref])
    assert undone.ref == ref
    found, (rows, debezium, _) = settled(stores)
    assert sorted((w.reference, w.rows) for w in found.other_writers) == sorted(
        [(ref, 5), (f"records:orders:0@{later[0]}", 2)]
    )
    assert (found.in_, found.out, found.status, found.duplicates) == (rows, debezium + 7, "duplicates", 7)
    with pytest.raises(AcceptanceError, match="was never accepted"):
        rec.revoke(stores, JOB, [ref])
