"""Orders produced straight into `orders` as the source connector writes them (Avro through the registry), poison
among them on request, and what the supplier-stats and iceberg-ingestion jobs must make of them: the expected 5 s
windows computed here, the job's window records read back, the Iceberg rows of a prefix."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
import time
import uuid
from decimal import Decimal

from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.expressions import StartsWith

from lineage_assets.connect.assets import ORDERS_TOPIC
from tests.service.lineage_assets.conftest import read_topic

SUPPLIERS = ["Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack"]
POISON_SCHEMA = {  # a registered writer schema whose bid_time may be null
    "type": "record",
    "name": "Order",
    "namespace": "lineage_lab.poison",
    "fields": [
        {"name": "supplier", "type": "string"},
        {"name": "item", "type": "string"},
        {"name": "price", "type": "string"},
        {"name": "bid_time", "type": ["null", "long"]},
        {"name": "order_id", "type": "string"},
    ],
}
TIMEOUT = 300


class Orders:
    """Produces orders (Avro through the registry, like the source connector) and the expected windows."""

    def __init__(self, settings):
        registry = SchemaRegistryClient({"url": settings.schema_registry_url})
        schema = registry.get_latest_version("orders-value").schema.schema_str
        self.serialize = AvroSerializer(registry, schema, conf={"auto.register.schemas": False})
        registry.register_schema("orders-poison-value", Schema(json.dumps(POISON_SCHEMA), "AVRO"))
        self.poison_serialize = AvroSerializer(
            registry,
            json.dumps(POISON_SCHEMA),
            conf={"auto.register.schemas": False, "subject.name.strategy": lambda ctx, name: "orders-poison-value"},
        )
        self.ctx = SerializationContext("orders", MessageField.VALUE)
        self.producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 20})
        self.token = uuid.uuid4().hex[:12]
        # the reference's suppliers, made unique to this producer: windows of earlier runs never match
        self.suppliers = [f"{name}-{self.token[:6]}" for name in SUPPLIERS]

    def produce(self, count: int, start: dt.datetime, step_ms: int, rng: random.Random) -> dict[str, dict]:
        """``count`` orders with bid_times start, start+step, ... (so each partition is in event-time order)."""
        orders = {}
        for i in range(count):
            order_id = f"ff-{self.token}-{start:%H%M%S}-{i}"
            order = {
                "order_id": order_id,
                "supplier": rng.choice(self.suppliers),
                "item": rng.choice(["Lamp", "Pen", "Chair", "Mug"]),
                "price": f"{Decimal(rng.randint(100, 15000)) / 100:.2f}",
                "bid_time": start + dt.timedelta(milliseconds=i * step_ms),
            }
            orders[order_id] = order
            self.producer.produce("orders", key=order_id, value=self.serialize(order, self.ctx))
        return orders

    def produce_poison(self, count: int, bid: dt.datetime) -> None:
        kinds = [
            lambda n: f"junk-{self.token}-{n}".encode(),
            lambda n: b"\x00\x7f\xff\xff\xf0" + f"unknown-id-{self.token}-{n}".encode(),
            lambda n: self.serialize(self.poison("abc", bid, n), self.ctx),
            lambda n: self.poison_serialize(self.poison("1.00", None, n), self.ctx),
        ]
        for n in range(count):
            self.producer.produce("orders", key=f"poison-{self.token}", value=kinds[n % len(kinds)](n))

    def poison(self, price: str, bid, n: int) -> dict:
        return {
            "order_id": f"poison-{self.token}-{n}",
            "supplier": "Bob",
            "item": "Pen",
            "price": price,
            "bid_time": bid,
        }

    def flush_windows(self, bid: dt.datetime) -> None:
        """One order per partition past the data: every partition's watermark passes the test's windows."""
        for partition in range(ORDERS_TOPIC.partitions):
            order = {
                "order_id": f"flush-{self.token}",
                "supplier": "Jack",
                "item": "-",
                "price": "0.00",
                "bid_time": bid,
            }
            self.producer.produce(
                "orders", key=order["order_id"], value=self.serialize(order, self.ctx), partition=partition
            )
        assert self.producer.flush(60) == 0


def expected_windows(orders: dict[str, dict]) -> dict[tuple[str, str], tuple[float, int]]:
    sums: dict[tuple[str, str], list] = {}
    for o in orders.values():
        start = o["bid_time"].replace(second=o["bid_time"].second // 5 * 5, microsecond=0)
        acc = sums.setdefault((start.strftime("%Y-%m-%dT%H:%M:%SZ"), o["supplier"]), [Decimal(0), 0])
        acc[0] += Decimal(o["price"])
        acc[1] += 1
    return {k: (round(float(total), 2), count) for k, (total, count) in sums.items()}


def stats_in(
    settings, expected: dict, timeout: float = TIMEOUT, to_end: bool = False
) -> list[tuple[tuple[str, str], tuple[float, int]]]:
    """The job's records of the ``expected`` windows, in the order written: until each window's record with its
    expected count has come, or (``to_end``) every one committed so far, duplicates kept."""
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}))
    ctx = SerializationContext("supplier-stats", MessageField.VALUE)

    def want(msg):
        v = deserialize(msg.value(), ctx)
        key = (v["window_start"], v["supplier"])
        if key not in expected:
            return None
        assert msg.key() == v["supplier"].encode(), "keyed by supplier"
        return key, (v["total_price"], v["count"])

    done = None if to_end else (lambda found: windows_complete(found, expected))
    return read_topic(settings, "supplier-stats", want, done, timeout)


def windows_complete(found: list, expected: dict) -> bool:
    """Whether the record that completes each expected window has come (its count reached): what a read waits for,
    so a job that never completes one is caught by the read's failure detector."""
    last = firings(found)
    return all(key in last and last[key][-1][1] >= count for key, (_, count) in expected.items())


def firings(found: list) -> dict[tuple[str, str], list[tuple[float, int]]]:
    """Each window's records in the order the job wrote them."""
    by_window: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for key, value in found:
        by_window.setdefault(key, []).append(value)
    return by_window


def counted(found: list) -> int:
    """Orders counted in the windows: each window's last firing holds its count."""
    return sum(records[-1][1] for records in firings(found).values())


def assert_windows_equal(found: list, expected: dict) -> None:
    """Every expected window, its last record with its count and its sum (to the cent). A window fires when the
    watermark passes its end and once more for each order that comes within the allowed lateness after that (an
    order of a partition that was idle when another one's orders moved the clock on), so its counts rise strictly
    from record to record: the same count twice is a window emitted twice."""
    by_window = firings(found)
    assert set(by_window) == set(expected), (
        f"windows the job wrote: missing {set(expected) - set(by_window)}, unexpected {set(by_window) - set(expected)}"
    )
    twice = {k: rs for k, rs in by_window.items() if any(a[1] >= b[1] for a, b in itertools.pairwise(rs))}
    assert not twice, f"(window, supplier): records without a new order between them, a window emitted twice: {twice}"
    got = {k: records[-1] for k, records in by_window.items()}
    wrong = {k: (got[k], v) for k, v in expected.items() if got[k][1] != v[1] or abs(got[k][0] - v[0]) > 1e-6}
    assert not wrong, f"(window, supplier): (job's last record, expected) differ: {wrong}"


def iceberg_rows(resources, prefix: str, want: int) -> dict[str, list[Decimal]]:
    table = resources["iceberg"].catalog().load_table("default.orders")
    found: dict[str, list[Decimal]] = {}
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        rows = table.refresh().scan(row_filter=StartsWith("order_id", prefix), selected_fields=("order_id", "price"))
        found = {}
        for r in rows.to_arrow().to_pylist():
            found.setdefault(r["order_id"], []).append(r["price"])
        if len(found) >= want:
            return found
        time.sleep(3)
    return found
