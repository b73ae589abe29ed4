"""Accepting and revoking another writer on the orders-source hop against the running stack: records produced
straight into ``orders`` (confluent-kafka, partition 0) are named by ``reconcile``, accepted up to their last offset,
named again when more arrive, and counted again when revoked. The expected figures come from the test's own readers:
``SELECT count(*)`` of the source table, a read-committed consumer of ``orders`` and the producer's delivery reports
(partition, offset). The count store is the test's own, so the stack's acceptances are never touched."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from lineage_assets.conservation import reconcile as rec
from lineage_assets.conservation.acceptances import AcceptanceError
from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.stores import Stores
from tests.service.lineage_assets.conservation.conftest import judge_orders_source

pytestmark = pytest.mark.service

JOB = "orders-source"
DEADLINE_S = 240


def settled(stores: Stores) -> tuple[HopBalance, tuple[int, int, int]]:
    """``reconcile``'s balance of the hop at a moment nothing moved: the judge reads the same before and after."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        before = judge_orders_source(stores)
        (found,) = rec.reconcile(stores, [JOB], confirm_after_s=0)
        after = judge_orders_source(stores)
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
