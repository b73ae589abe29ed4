"""The orders-source hop against the running stack, judged by independent readers: ``SELECT count(*)`` of the source
table (psycopg) and a read-committed consumer counting the records of ``orders`` that carry Debezium's header."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from lineage_assets.conservation import orders_source
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.stores import Stores
from tests.service.lineage_assets.conservation.conftest import judge_orders_source

pytestmark = pytest.mark.service

DEADLINE_S = 240


def settled_balance(stores: Stores):
    """The hop's balance at a moment nothing moved: the judge reads the same before and after it."""
    hop = hops(stores.pipeline)["orders-source"]
    deadline = time.monotonic() + DEADLINE_S
    while True:
        before = judge_orders_source(stores)
        found = orders_source.balance(hop, stores)
        after = judge_orders_source(stores)
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
