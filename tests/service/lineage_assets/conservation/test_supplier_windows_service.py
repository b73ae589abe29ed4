"""supplier-stats' hop on the running stack, judged by an independent consumer: it balances when the stream is
quiet; three windows produced straight into supplier-stats by a plain producer are reported as duplicates with the
other writer named; acknowledging them (the repair: Kafka cannot delete records from a partition's middle) clears
it, in the test's count store and in the stack's own. A window fired again with its count unchanged and its total a
cent off is named by the value balance (total_price against the sum of price), and cleared when fired again right."""

from __future__ import annotations

import base64
import contextlib
import json
import time
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import dagster as dg
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from infra.settings import StackSettings
from lineage_assets.conservation import supplier_windows
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import hops
from lineage_assets.conservation.stores import Stores, count_store_path
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources

pytestmark = pytest.mark.service

ORDERS, OUTPUT, DLQ, GROUP = "orders", "supplier-stats", "orders-dlq-supplier-stats", "supplier-stats"
HEADER = ("lineage-lab-writer", b"supplier-stats")
CENT = Decimal("0.01")


@dataclass(frozen=True)
class Judged:
    """Figures read by the test's own consumer."""

    committed: dict[int, int]
    ends: tuple
    in_: int
    job_out: int  # last count per (window_start, supplier) of the job's records
    foreign: dict[tuple[int, int], int]  # (partition, offset) -> count of records without the header
    dead_letters: int


def _records(settings: StackSettings, topic: str, stop: dict[int, int] | None = None) -> list:
    """Every committed record of ``topic`` (below ``stop[p]`` when given), read from the log start."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"test-supplier-windows-{time.time_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 20,  # a partition ending in a transaction marker: its EOF without a 500 ms wait
        }
    )
    found = []
    try:
        parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        for p in parts:
            lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            end = hi if stop is None else min(stop[p], hi)
            if lo >= end:
                continue
            consumer.assign([TopicPartition(topic, p, lo)])
            done = False
            while not done:
                for msg in consumer.consume(500, timeout=0.2):  # returns at 500 or the timeout: short polls
                    if msg.error() is not None:
                        assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                        done = True
                        break
                    if msg.offset() >= end:
                        done = True
                        break
                    found.append(msg)
    finally:
        consumer.close()
    return found


def judge(settings: StackSettings) -> Judged:
    admin = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        parts = sorted(admin.list_topics(ORDERS, timeout=10).topics[ORDERS].partitions)
        committed = {
            tp.partition: max(tp.offset, 0)
            for tp in admin.committed([TopicPartition(ORDERS, p) for p in parts], timeout=10)
        }
        ends = tuple(
            admin.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False)[1]
            for t in (ORDERS, OUTPUT, DLQ)
            for p in sorted(admin.list_topics(t, timeout=10).topics[t].partitions)
        )
    finally:
        admin.close()
    decode = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}))
    stats = _records(settings, OUTPUT)
    headered = [m.timestamp()[1] for m in stats if HEADER in (m.headers() or [])]
    since = min(headered) if headered else None  # unheadered records before the job set its header are its own
    last: dict[tuple[str, str], int] = {}
    foreign: dict[tuple[int, int], int] = {}
    for m in sorted(stats, key=lambda m: (m.partition(), m.offset())):
        value = decode(m.value(), SerializationContext(OUTPUT, MessageField.VALUE))
        if HEADER in (m.headers() or []) or since is None or m.timestamp()[1] < since:
            last[(value["window_start"], value["supplier"])] = value["count"]
        else:
            foreign[(m.partition(), m.offset())] = value["count"]
    return Judged(
        committed,
        ends,
        len(_records(settings, ORDERS, committed)),
        sum(last.values()),
        foreign,
        len(_records(settings, DLQ)),
    )


def window_writer(settings: StackSettings):
    """(an Avro serializer of supplier-stats' value schema as the job registered it, a plain producer): how the
    tests write windows into the topic themselves."""
    client = SchemaRegistryClient({"url": settings.schema_registry_url})
    serialize = AvroSerializer(
        client,
        client.get_latest_version(f"{OUTPUT}-value").schema.schema_str,
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    return serialize, Producer({"bootstrap.servers": settings.kafka_bootstrap})


@pytest.fixture()
def stack(tmp_path):
    settings = StackSettings.from_env()
    pipeline = Pipeline.from_settings(settings)
    wanted = {
        k: v
        for k, v in build_resources(settings).items()
        if k in ("kafka", "iceberg", "object_store", "flink", "connect", "source_db")
    }
    with dg.build_resources(wanted) as res:
        stores = Stores(pipeline, res, count_store_path(settings))
        stores.counts = CountStore(tmp_path / "counts.sqlite")
        # the stack's count store, which the checks and the CLI use
        own = Stores(pipeline, res, count_store_path(settings))
        yield settings, hops(pipeline)["supplier-stats"], stores, own


def quiet_balance(settings, hop, stores, known_foreign: dict | None = None, deadline_s: float = 240.0):
    """A balance taken while the independent figures stand still and the stream is quiet (in = out + dead
    letters by the judge's own count: nothing pending); returns (balance, judged)."""
    deadline = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < deadline:
        before = judge(settings)
        if before.in_ == before.job_out + before.dead_letters:
            found = supplier_windows.balance(hop, stores)
            after = judge(settings)
            if after == before:
                return found, before
        last = before
        time.sleep(3)
    raise AssertionError(f"the stream did not stand still and quiet within {deadline_s:.0f} s: {last}")


def test_balances_then_names_a_foreign_producer_and_clears_once_acknowledged(stack) -> None:
    settings, hop, stores, own = stack
    b, j = quiet_balance(settings, hop, stores)
    earlier = dict(j.foreign)  # another producer's records an earlier run left: reviewed, acknowledged first
    if earlier:
        assert sum(w.rows for w in b.other_writers) == sum(earlier.values()), b.summary()
        supplier_windows.acknowledge_other_writers(stores)
        b, j = quiet_balance(settings, hop, stores)
    assert (b.in_, b.out, b.dead_letters, b.pending) == (j.in_, j.job_out, j.dead_letters, 0)
    assert b.status == "balanced" and b.other_writers == ()
    assert b.range["orders"] == {str(p): c for p, c in j.committed.items()}

    # the fault: three windows produced straight into the topic, Avro as the job writes them, count 2 each
    serialize, producer = window_writer(settings)
    written: list[tuple[int, int]] = []

    def delivered(err, msg) -> None:
        assert err is None, err
        written.append((msg.partition(), msg.offset()))

    for supplier in ("Zed", "Yan", "Xia"):
        value = {
            "window_start": "2026-01-01T00:00:00Z",
            "window_end": "2026-01-01T00:00:05Z",
            "supplier": supplier,
            "total_price": 10.0,
            "count": 2,
        }
        producer.produce(
            OUTPUT,
            key=supplier.encode(),
            value=serialize(value, SerializationContext(OUTPUT, MessageField.VALUE)),
            on_delivery=delivered,
        )
    assert producer.flush(30) == 0 and len(written) == 3
    through: dict[int, int] = {}
    for p, o in written:
        through[p] = max(through.get(p, -1), o)
    try:
        b, j = quiet_balance(settings, hop, stores)
        new = {k: v for k, v in j.foreign.items() if k not in earlier}
        assert set(new) == set(written) and sum(new.values()) == 6
        assert b.status == "duplicates" and b.duplicates == 6
        assert (b.in_, b.out, b.dead_letters, b.pending) == (j.in_, j.job_out + 6, j.dead_letters, 0)
        (named,) = b.other_writers
        assert named.output == hop.output.qualified_name and named.rows == 6
        assert named.what.startswith("3 records without the job's writer header")
        for p in sorted(through):
            offsets = sorted(o for q, o in written if q == p)
            assert f"{p}:{offsets[0]}..{offsets[-1]}" in named.what
    finally:
        # the repair: the foreign records are acknowledged (in the test's store and the stack's own)
        acknowledged = supplier_windows.acknowledge_other_writers(stores, through)
        with own.counts.locked(hop.job.name):  # the stack's store: its sensors and checks update it too
            supplier_windows.balance(hop, own)  # the stack's book reads them first
            supplier_windows.acknowledge_other_writers(own, through)
    assert sum(w.rows for w in acknowledged) == 6
    b, j = quiet_balance(settings, hop, stores)
    assert b.status == "balanced" and b.other_writers == () and b.duplicates == 0
    assert (b.in_, b.out, b.dead_letters, b.pending) == (j.in_, j.job_out, j.dead_letters, 0)
    acknowledged_records = 3 + len(earlier)
    assert any(f"{acknowledged_records} acknowledged foreign records" in n for n in b.notes), b.notes
    with own.counts.locked(hop.job.name):
        theirs = supplier_windows.balance(hop, own)
    assert theirs.other_writers == () and theirs.status in ("balanced", "pending")


def _cents(text) -> Decimal:
    """The judge's own reading of a price: a finite decimal in whole cents that DECIMAL(10,2) holds, else nothing."""
    try:
        d = Decimal(str(text).strip())
        if not d.is_finite() or d != d.quantize(CENT) or abs(d) > Decimal("99999999.99"):
            return Decimal(0)
        return d.quantize(CENT)
    except (InvalidOperation, ValueError):
        return Decimal(0)


def judge_values(settings: StackSettings, committed: dict[int, int]) -> dict[str, object]:
    """Sums of price in (orders below C), in the dead letters' raw orders, and of total_price over each window's
    last headered firing; and that firing per window, read by the test's own consumer and deserializer."""
    decode = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}))

    def price(value: bytes | None) -> Decimal:
        """An order's price as the judge reads it; a value that is no order (another test's hostile records)
        weighs nothing."""
        try:
            return _cents(decode(value, SerializationContext(ORDERS, MessageField.VALUE))["price"])
        except Exception:
            return Decimal(0)

    in_ = sum((price(m.value()) for m in _records(settings, ORDERS, committed)), Decimal(0))
    dead = Decimal(0)
    for m in _records(settings, DLQ):
        with contextlib.suppress(ValueError, TypeError, KeyError):  # a dead letter without a raw order weighs nothing
            dead += price(base64.b64decode(json.loads(m.value())["raw_value"] or ""))
    last: dict[tuple[str, str], dict] = {}
    for m in sorted(_records(settings, OUTPUT), key=lambda m: (m.partition(), m.offset())):
        if HEADER in (m.headers() or []):
            value = decode(m.value(), SerializationContext(OUTPUT, MessageField.VALUE))
            last[(value["window_start"], value["supplier"])] = value
    out = sum((Decimal(repr(v["total_price"])).quantize(CENT) for v in last.values()), Decimal(0))
    return {"in": in_.quantize(CENT), "dead_letters": dead.quantize(CENT), "out": out.quantize(CENT), "last": last}


def test_a_window_whose_total_is_changed_with_its_count_is_named_and_cleared_when_repaired(stack) -> None:
    """The value fault: the newest window fired again (with the job's header, as a faulty job would) with its count
    unchanged and its total a cent higher. Counts balance; the values do not, and the window is named. Firing it
    again with its true total repairs it."""
    settings, hop, stores, own = stack
    b, j = quiet_balance(settings, hop, stores)
    if j.foreign:  # another producer's records an earlier test left (reviewed there): acknowledged first
        supplier_windows.acknowledge_other_writers(stores)
        b, j = quiet_balance(settings, hop, stores)
    judged = judge_values(settings, j.committed)
    (values,) = b.values
    assert (values.column, values.source) == ("total_price", "price")
    assert values.as_dict()["in"] == str(judged["in"]) and values.as_dict()["out"] == str(judged["out"])
    assert values.as_dict()["dead_letters"] == str(judged["dead_letters"])
    assert (b.status, values.as_dict()["difference"]) == ("balanced", "0.00")

    newest = max(judged["last"].values(), key=lambda v: (v["window_end"], v["supplier"]))
    serialize, producer = window_writer(settings)

    def fire(total: float) -> None:
        value = {**newest, "total_price": total}
        producer.produce(
            OUTPUT,
            key=newest["supplier"].encode(),
            value=serialize(value, SerializationContext(OUTPUT, MessageField.VALUE)),
            headers=[HEADER],
        )
        assert producer.flush(30) == 0

    true_total = newest["total_price"]
    fire(float(Decimal(repr(true_total)) + CENT))
    try:
        b, j = quiet_balance(settings, hop, stores)
        (values,) = b.values
        assert (b.status, b.missing, b.duplicates) == ("values_differ", 0, 0), b.summary()
        assert values.as_dict()["difference"] == "-0.01"
        (where,) = values.where
        assert where.startswith(f"window {newest['window_start']} supplier {newest['supplier']}: "), where
        assert b.wrong and "total_price (sum of price)" in b.summary()
    finally:
        fire(true_total)  # the repair: the window's true total fired again (last firing wins)
    b, j = quiet_balance(settings, hop, stores)
    (values,) = b.values
    assert (b.status, values.as_dict()["difference"], values.where) == ("balanced", "0.00", ())
    with own.counts.locked(hop.job.name):  # the stack's own book reads the repair too
        theirs = supplier_windows.balance(hop, own)
    assert theirs.values[0].as_dict()["difference"] in ("0.00", None), theirs.summary()
