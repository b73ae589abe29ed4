"""The iceberg-ingestion hop on the running stack, judged by independent readers: a pyiceberg scan counting the
table's rows, a read-committed consumer counting the DLQ, and one counting ``orders`` below the group's committed
offsets (read here with confluent-kafka). Rows that other writers put into the table before (earlier tests write
into it on purpose) are accepted first, as a person would after review: the judge then says every change the
independent count cannot explain is a named, accepted or new, other writer's. Then fault (a): 10 rows deleted from
``default.orders`` with pyiceberg must show as 10 missing with the deleting snapshot named, and clear once the same
rows are appended back."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from pyiceberg.expressions import EqualTo, In

from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.reconcile import accept, reconcile
from tests.service.lineage_assets.conftest import commit_retrying
from tests.service.lineage_assets.conservation.conftest import group_committed, judge_consumer

pytestmark = pytest.mark.service

GROUP = "iceberg-ingestion"
TOPIC = "orders"
DLQ = "orders-dlq-flink"
TABLE = "default.orders"


@pytest.fixture(scope="module")
def hop(stores):
    found = hops(stores.pipeline)["iceberg-ingestion"]
    earlier = balance(found, stores).other_writers
    if earlier:
        accept(stores, found.job.name, [w.reference for w in earlier], by="test_iceberg_ingestion_service")
    return found


def balance(hop, stores):
    """The hop as reconcile reports it (accepted changes left out), one look."""
    (found,) = reconcile(stores, [hop.job.name], confirm_after_s=0)
    return found


def _consumer(settings, **extra) -> Consumer:
    return judge_consumer(settings, **extra)


def committed_offsets(settings) -> dict[int, int]:
    return group_committed(settings, TOPIC, GROUP)


def count_records(settings, topic: str, below: dict[int, int] | None = None) -> int:
    """Committed records of ``topic`` (below the given offsets per partition, else all), read one by one."""
    consumer = _consumer(settings)
    total = 0
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            stop = high if below is None else below[p]
            if stop <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None:
                    continue
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    break
                if msg.offset() >= stop:
                    break
                total += 1
                if msg.offset() + 1 >= stop:
                    break
            else:
                pytest.fail(f"reading {topic}[{p}] up to {stop} took over 60 s")
    finally:
        consumer.close()
    return total


@dataclass(frozen=True)
class Judge:
    committed: dict[int, int]
    snapshot: int | None
    rows: int
    dead_letters: int
    below_committed: int


def judge(settings, catalog) -> Judge:
    """The hop counted independently: rows by a scan, the DLQ and ``orders`` below C by consumers; taken again
    until C and the snapshot held still around the reads."""
    for _ in range(10):
        before = committed_offsets(settings)
        table = catalog.load_table(TABLE)
        snapshot = table.current_snapshot()
        rows = table.scan().to_arrow().num_rows
        dead = count_records(settings, DLQ)
        after = committed_offsets(settings)
        table.refresh()
        now = table.current_snapshot()
        same = (snapshot.snapshot_id if snapshot else None) == (now.snapshot_id if now else None)
        if before == after and same:
            return Judge(after, now.snapshot_id if now else None, rows, dead, count_records(settings, TOPIC, after))
        time.sleep(2)
    pytest.fail("the group's offsets or the table moved during every one of 10 independent counts")


def balance_judged(settings, stores, hop):
    """(the hop's balance, the independent count) taken at the same committed offsets and snapshot."""
    for _ in range(6):
        before = judge(settings, stores.catalog)
        b = balance(hop, stores)
        after = judge(settings, stores.catalog)
        if (
            before == after
            and b.range["committed offsets"] == before.committed
            and b.range["snapshot"] == (before.snapshot)
        ):
            return b, before
        time.sleep(3)
    pytest.fail("the hop and the independent count never saw the same committed offsets and snapshot")


def assert_matches(b, j: Judge) -> None:
    assert b.out + sum(w.rows for w in b.accepted) == j.rows, b.summary()
    assert b.dead_letters == j.dead_letters, b.summary()
    assert b.in_ - b.pending == j.below_committed, b.summary()
    # what the independent count cannot explain by the topic is exactly what other writers did, named or accepted
    assert sum(w.rows for w in b.other_writers + b.accepted) == j.rows + j.dead_letters - j.below_committed, b.summary()


def test_balances_now(settings, stores, hop):
    b, j = balance_judged(settings, stores, hop)
    assert_matches(b, j)
    assert b.status in ("balanced", "pending") and b.missing == 0 and b.duplicates == 0, b.summary()
    assert b.range["group"] == GROUP
    # a second run reads only what is new and says the same
    again, j2 = balance_judged(settings, stores, hop)
    assert_matches(again, j2)
    assert again.missing == 0 and again.duplicates == 0


def _pick_rows(table) -> pa.Table:
    """10 orders that occur once in the table, as the table holds them."""
    ids = Counter(table.scan(selected_fields=("order_id",)).to_arrow().column("order_id").to_pylist())
    once = sorted(i for i, n in ids.items() if n == 1)
    assert len(once) >= 10, f"the table holds only {len(once)} distinct single orders"
    chosen = once[:: max(len(once) // 10, 1)][:10]
    rows = table.scan(row_filter=In("order_id", chosen)).to_arrow()
    assert rows.num_rows == 10
    return rows


def _new_snapshot(table, known: set[int]):
    table.refresh()
    return [
        s
        for s in table.snapshots()
        if s.snapshot_id not in known and "flink.job-id" not in s.summary.additional_properties
    ]


def test_deleted_rows_are_missing_and_named_then_clear_when_appended_back(settings, stores, hop):
    balance(hop, stores)  # classify everything up to now
    table = stores.catalog.load_table(TABLE)
    known = {s.snapshot_id for s in table.snapshots()}
    rows = _pick_rows(table)
    ids = rows.column("order_id").to_pylist()
    deleted = False
    try:
        commit_retrying(table, lambda t: t.delete(delete_filter=In("order_id", ids)))
        deleted = True
        deleting = _new_snapshot(table, known)
        assert len(deleting) == 1, deleting
        delete_id = deleting[0].snapshot_id
        known.add(delete_id)

        b, j = balance_judged(settings, stores, hop)
        assert_matches(b, j)
        assert b.status == "missing" and b.missing == 10, b.summary()
        named = [w for w in b.other_writers if f"snapshot {delete_id} " in w.what]
        assert len(named) == 1 and named[0].rows == -10, b.other_writers
        assert named[0].output == hop.output.qualified_name
    finally:
        if deleted:  # the repair: the same 10 rows, as the scan returned them
            table = stores.catalog.load_table(TABLE)
            commit_retrying(table, lambda t: t.append(rows))
    appended = _new_snapshot(table, known)
    assert len(appended) == 1, appended
    append_id = appended[0].snapshot_id

    b, j = balance_judged(settings, stores, hop)
    assert_matches(b, j)
    assert b.missing == 0 and b.duplicates == 0 and b.status in ("balanced", "pending"), b.summary()
    by_snapshot = {w.what.split(" ")[1]: w.rows for w in b.other_writers}
    assert by_snapshot[str(delete_id)] == -10 and by_snapshot[str(append_id)] == 10, b.other_writers


def _one_cent_more(row: pa.Table) -> pa.Table:
    """The same order with its price a cent dearer, as the table holds it."""
    (record,) = row.to_pylist()
    record["price"] += Decimal("0.01")
    return pa.Table.from_pylist([record], schema=row.schema)


def test_a_price_overwritten_with_the_count_unchanged_is_named_then_clears_when_put_back(settings, stores, hop):
    """Copies balance a checksum of their copied columns: one row overwritten by another writer with its price a
    cent dearer keeps every count (a row out, a row in) and is named by the snapshots that changed the checksum;
    the row overwritten back as it was clears it."""
    balance(hop, stores)
    table = stores.catalog.load_table(TABLE)
    known = {s.snapshot_id for s in table.snapshots()}
    row = _pick_rows(table).slice(0, 1)
    order_id = row.column("order_id")[0].as_py()
    changed = False
    try:
        commit_retrying(
            table, lambda t: t.overwrite(_one_cent_more(row), overwrite_filter=EqualTo("order_id", order_id))
        )
        changed = True
        changing = {s.snapshot_id for s in _new_snapshot(table, known)}
        known |= changing
        b, j = balance_judged(settings, stores, hop)
        assert_matches(b, j)
        assert b.status == "values_differ" and b.difference == 0, b.summary()
        (found,) = b.values
        assert found.differs and any(str(s) in w for s in changing for w in found.where), found.summary()
    finally:
        if changed:
            table = stores.catalog.load_table(TABLE)
            commit_retrying(table, lambda t: t.overwrite(row, overwrite_filter=EqualTo("order_id", order_id)))
    b, j = balance_judged(settings, stores, hop)
    assert_matches(b, j)
    assert b.status in ("balanced", "pending") and not b.values[0].differs, b.summary()
